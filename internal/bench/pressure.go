package bench

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

const pressureType tasks.Type = "bench.pressure"

// pressureModes are the kinds of pressure of Options.Mode.
var pressureModes = []string{"none", "killbackends", "idletx", "readers", "stop"}

const (
	// pressureWork is the simulated work of each poll.
	pressureWork = time.Millisecond
	// drainTimeout bounds the wait for the backlog to drain once the
	// producer has stopped; what is left then is reported lost.
	drainTimeout = 2 * time.Minute
)

// pressureState is a task's state: its number in the producer's sequence,
// so that what was created can be checked afterwards.
type pressureState struct {
	Seq int64 `json:"seq"`
}

// pollRecord is a task's result: when the poll that ended it started, on
// this machine's clock (the pickup latency is its distance to created_at).
type pollRecord struct {
	PollStartUS int64 `json:"poll_start_us"`
}

// pressurePoller does about pressureWork of work and ends the task,
// recording when the poll started.
func pressurePoller(polls *atomic.Int64) executor.PollerFunc[pressureState, json.RawMessage] {
	return func(ctx context.Context, t *executor.Task[pressureState, json.RawMessage]) (executor.Action, error) {
		start := time.Now()
		polls.Add(1)
		time.Sleep(pressureWork)
		return executor.DoneWith(pollRecord{PollStartUS: start.UnixMicro()}), nil
	}
}

// phases are the scenario's time marks, on this machine's clock.
type phases struct {
	start    time.Time // the warmup begins: the producer starts
	pressure time.Time // the pressure begins
	release  time.Time // the pressure ends
	stop     time.Time // the producer stops
}

func newPhases(start time.Time, o Options) phases {
	p := phases{start: start, pressure: start.Add(o.Warmup)}
	p.release = p.pressure.Add(o.Duration)
	p.stop = p.release.Add(o.After)
	return p
}

// runPressure: a producer creates Rate tasks a second from the start of
// Warmup to the end of After; executors poll each once (about 1 ms of
// work) to Done; during Duration, Mode applies its pressure. Afterwards,
// the backlog is left to drain (at most drainTimeout), and the figures come
// from the tasks themselves (created_at, done_at, the poll's start in
// their result) and from the backlog sampled every backlogEvery.
func runPressure(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	pressureParams(res, o)
	ctl, err := r.pool(ctx, 2)
	if err != nil {
		return err
	}
	defer ctl.Close()
	r.progress("starting %d executor(s), %d workers", o.Executors, o.Workers)
	execs, err := startPressureExecutors(ctx, r)
	if err != nil {
		return err
	}
	defer execs.kill()
	sampler, err := startBacklogSampler(ctx, r)
	if err != nil {
		return err
	}
	defer sampler.stop()
	prod, err := startProducer(ctx, r)
	if err != nil {
		return err
	}
	defer prod.close()

	// The mode's own figures, and what happened to the executors, follow
	// the common figures.
	more := &Result{}
	ph := newPhases(time.Now(), o)
	busy, err := runPhases(ctx, r, ph, prod, func() (releaseFunc, error) {
		return startPressureMode(ctx, r, ctl, execs, ph)
	}, more)
	if err != nil {
		return err
	}
	r.progress("producer stopped after %d tasks; waiting for the backlog to drain (at most %s)", prod.created.Load(), drainTimeout)
	if err := waitDrain(ctx, sampler, more); err != nil {
		return err
	}
	samples, failed := sampler.stop()
	polls, logs := execs.stop(ctx, more)

	rows, err := readPressureTasks(ctx, r)
	if err != nil {
		return err
	}
	m := pressureMeasure{ph: ph, tasks: rows, samples: samples, produced: prod.created.Load(), rate: o.Rate}
	m.record(res)
	res.Metrics = append(res.Metrics, more.Metrics...)
	res.Notes = append(res.Notes, more.Notes...)
	res.metric("created_by_producer", prod.created.Load())
	res.metric("create_retries", prod.retries.Load())
	res.metric("create_ambiguous", prod.ambiguous.Load())
	res.metric("polls", polls)
	res.metric("extra_polls", polls-int64(res.Metrics.Float("done")))
	res.metric("backlog_samples_failed", failed)
	if err := addHistoryOutcomes(ctx, r, res); err != nil {
		return err
	}
	if busy.ok {
		res.metric("machine_cpu_busy_pct_during", 100*busy.busy)
	}
	addLogCounts(res, logs)
	return nil
}

func pressureParams(res *Result, o Options) {
	res.param("mode", o.Mode)
	res.param("rate", o.Rate)
	res.param("warmup", o.Warmup)
	res.param("duration", o.Duration)
	res.param("after", o.After)
	res.param("workers", o.Workers)
	res.param("executors", o.Executors)
	res.param("in_process", o.InProcess)
	res.param("pool", o.Pool)
	switch o.Mode {
	case "killbackends":
		res.param("kill_rate", o.KillRate)
	case "readers":
		res.param("readers", o.Readers)
	case "stop":
		res.param("stops", o.Stops)
	}
}

// runPhases runs the producer through the phases ph, applying the
// pressure that start starts during the pressure phase (its figures go to
// res), and returns once the producer has stopped, with the machine's CPU
// use during the pressure.
func runPhases(ctx context.Context, r *runner, ph phases, prod *producer, start func() (releaseFunc, error), res *Result) (cpuUsage, error) {
	o := r.opts
	prod.run(ctx, ph)
	r.progress("warmup: %d tasks/s for %s", o.Rate, o.Warmup)
	if err := sleepUntil(ctx, ph.pressure); err != nil {
		return cpuUsage{}, err
	}
	r.progress("pressure: %s for %s", o.Mode, o.Duration)
	cpu0 := sampleCPU(ctx, nil)
	release, err := start()
	if err != nil {
		return cpuUsage{}, err
	}
	err = sleepUntil(ctx, ph.release)
	cpu1 := sampleCPU(ctx, nil)
	if err == nil {
		r.progress("after: %d tasks/s for %s", o.Rate, o.After)
	}
	release(res)
	if err != nil {
		return cpuUsage{}, err
	}
	return cpu0.until(cpu1), prod.wait()
}

// waitDrain waits, at most drainTimeout, until a backlog sample taken
// after the producer stopped finds no task left; a backlog still there
// then is noted in res, and counted lost.
func waitDrain(ctx context.Context, sampler *backlogSampler, res *Result) error {
	from := time.Now()
	err := waitUntil(ctx, "the backlog to drain", drainTimeout, 100*time.Millisecond, func() (bool, error) {
		s, ok := sampler.latest()
		return ok && s.at.After(from) && s.n == 0, nil
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		res.note("the backlog did not drain within %s of the producer's stop: what is left is counted lost", drainTimeout)
	default:
		res.metric("drain_sec", time.Since(from).Seconds())
	}
	return nil
}

// sleepUntil waits until t, or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
