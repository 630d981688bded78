package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

const (
	priorityType tasks.Type = "bench.priority"
	// highPriority is the priority of the tasks priority times; the backlog
	// has the default, 0.
	highPriority = 10
	// backlogRefillEvery is how often priority checks its backlog, and
	// tops it up to Options.Backlog once a batch (Options.Batch, at most
	// half the backlog) is missing.
	backlogRefillEvery = 20 * time.Millisecond
)

// priorityOrder is a priority task's state: a high-priority task numbered
// Seq, or (High false) one of the backlog.
type priorityOrder struct {
	High bool `json:"high,omitempty"`
	Seq  int  `json:"seq,omitempty"`
}

// highPoll is the start of a high-priority task's poll.
type highPoll struct {
	seq   int
	start time.Time
}

// prioritySample is one high-priority task's latency, and its parts: from
// the commit of its create to the start of the claim that took it (wait),
// that claim (claim), and from its end to the poll's start (start).
type prioritySample struct {
	latency, wait, claim, start time.Duration
}

// priorityPoller reports the start of each high-priority poll on polled,
// and polls the backlog's tasks in pollTime each (a sleep), counting them.
func priorityPoller(pollTime time.Duration, polled chan<- highPoll, low *atomic.Int64) executor.PollerFunc[priorityOrder, json.RawMessage] {
	return func(ctx context.Context, t *executor.Task[priorityOrder, json.RawMessage]) (executor.Action, error) {
		start := time.Now()
		if t.State.High {
			select {
			case polled <- highPoll{t.State.Seq, start}:
			default: // nobody waits for it (a second poll)
			}
			return executor.Done(), nil
		}
		low.Add(1)
		if pollTime > 0 {
			time.Sleep(pollTime)
		}
		return executor.Done(), nil
	}
}

// priorityPhase is what one phase of priority measured.
type priorityPhase struct {
	samples []prioritySample
	commit  []time.Duration
}

// parts returns the p50 of the latencies and of their parts.
func (ph priorityPhase) parts() (latency, wait, claim, start float64) {
	var l, w, c, s []time.Duration
	for _, x := range ph.samples {
		l, w, c, s = append(l, x.latency), append(w, x.wait), append(c, x.claim), append(s, x.start)
	}
	return percentiles(l, 50)[0], percentiles(w, 50)[0], percentiles(c, 50)[0], percentiles(s, 50)[0]
}

// latencies returns the latencies of the samples.
func (ph priorityPhase) latencies() []time.Duration {
	out := make([]time.Duration, len(ph.samples))
	for i, x := range ph.samples {
		out[i] = x.latency
	}
	return out
}

// runPriority: N high-priority tasks created one at a time, Gap apart,
// each once the one before has been polled; latency from the commit of its
// create to the start of its poll, first with nothing else in the queue,
// then behind Backlog ready tasks of the same type and priority 0 that the
// executor is busy polling (PollTime each), topped up as they go.
func runPriority(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	res.param("samples", o.N)
	res.param("gap", o.Gap)
	res.param("backlog", o.Backlog)
	res.param("workers", o.Workers)
	res.param("poll_time", o.PollTime)
	res.param("priority", highPriority)
	res.param("priority_slots", o.PrioritySlots)
	db, err := r.pool(ctx, 6)
	if err != nil {
		return err
	}
	defer db.Close()
	polled := make(chan highPoll, 2*o.N)
	var low atomic.Int64
	clock := &claimClock{}
	cfg := r.executorConfig(0)
	cfg.PrioritySlots = o.PrioritySlots
	clock.next, cfg.Hooks = cfg.Hooks, clock
	start := func() (*group, error) {
		return r.startExecutors(ctx, 1, o.Workers, cfg, func(e *executor.Executor) {
			executor.Register(e, priorityType, priorityPoller(o.PollTime, polled, &low), r.typeOptions()...)
		})
	}

	r.progress("%d high-priority tasks on an empty queue", o.N)
	grp, err := start()
	if err != nil {
		return err
	}
	empty, err := r.priorityPhase(ctx, db, polled, clock, 0)
	if err != nil {
		grp.cleanup()
		return fmt.Errorf("empty queue: %w", err)
	}
	if err := grp.stop(); err != nil {
		return err
	}

	r.progress("creating a backlog of %d tasks", o.Backlog)
	if _, _, err := r.createTasks(ctx, db, o.Backlog, tasks.Spec{Type: priorityType, State: priorityOrder{}}); err != nil {
		return err
	}
	if err := r.analyze(ctx, db); err != nil {
		return err
	}
	rf := &refiller{r: r, db: db, low: &low, target: o.Backlog, step: max(1, min(o.Batch, o.Backlog/2)),
		created: int64(o.Backlog), min: int64(o.Backlog)}
	if grp, err = start(); err != nil {
		return err
	}
	defer grp.cleanup()
	// Until the executor is busy with the backlog: every slot has been
	// filled twice over.
	if err := waitUntil(ctx, "the executor to poll the backlog", time.Minute, 10*time.Millisecond, func() (bool, error) {
		return low.Load() >= int64(2*o.Workers), nil
	}); err != nil {
		return err
	}
	r.progress("%d high-priority tasks behind the backlog", o.N)
	rctx, stopRefill := context.WithCancel(ctx)
	refillDone := make(chan error, 1)
	go func() { refillDone <- rf.loop(rctx) }()
	low0, t0 := low.Load(), time.Now()
	busy, err := r.priorityPhase(ctx, db, polled, clock, o.N)
	lowPolls, elapsed := low.Load()-low0, time.Since(t0)
	stopRefill()
	if rerr := <-refillDone; err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("behind the backlog: %w", err)
	}
	var left int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks
		WHERE task_type = $1 AND claim IS NULL AND done_at IS NULL AND wake_at IS NOT NULL`, string(priorityType)).Scan(&left); err != nil {
		return err
	}
	if err := grp.stop(); err != nil {
		return err
	}

	pe := percentiles(empty.latencies(), 50, 95, 99)
	pb := percentiles(busy.latencies(), 50, 95, 99)
	res.metric("empty_p50_ms", pe[0])
	res.metric("empty_p95_ms", pe[1])
	res.metric("empty_p99_ms", pe[2])
	res.metric("backlog_p50_ms", pb[0])
	res.metric("backlog_p95_ms", pb[1])
	res.metric("backlog_p99_ms", pb[2])
	res.metric("backlog_vs_empty_p50", pb[0]/pe[0])
	for _, ph := range []struct {
		name string
		ph   priorityPhase
	}{{"empty", empty}, {"backlog", busy}} {
		_, w, c, s := ph.ph.parts()
		res.metric(ph.name+"_wait_p50_ms", w)
		res.metric(ph.name+"_claim_p50_ms", c)
		res.metric(ph.name+"_start_p50_ms", s)
	}
	res.metric("commit_p50_ms", percentiles(append(empty.commit, busy.commit...), 50)[0])
	res.metric("backlog_polls_per_sec", rate(int(lowPolls), elapsed))
	res.metric("backlog_min", rf.lowest())
	res.metric("backlog_left", left)
	res.metric("backlog_refilled", rf.added())
	res.metric("priority_lane_tasks", clock.laneTasks())
	res.note("latency = start of the high-priority task's poll - the time taken just before the COMMIT of its create (tasks.Create with Priority %d in a transaction of its own); commit_* is the COMMIT's own time", highPriority)
	res.note("its parts (p50 of each): *_wait = from that time to the start of the claim that took the task (the last claim to end before its poll started; executor.Hooks ClaimDone; below zero when a claim sent just before that COMMIT still saw the task), *_claim = that claim, round trip included, *_start = from the claim's end to the poll's start")
	res.note("priority_lane_tasks: the tasks claimed into the executor's priority slots (-priority-slots), in both phases; only tasks above priority 0 are")
	res.note("backlog: ready tasks of the same type at priority 0, each polled in -poll-time; topped up to -backlog whenever a batch (-batch, at most half the backlog) is missing, a batch or so at a time, while the high-priority tasks are timed; backlog_min is its lowest (created - polls started) while the high-priority tasks were timed, backlog_left the ready ones counted at the end")
	if rf.lowest() == 0 {
		return fmt.Errorf("the backlog ran out while the high-priority tasks were timed (%.0f backlog polls/s): use a larger -backlog or a longer -poll-time",
			rate(int(lowPolls), elapsed))
	}
	return nil
}

// priorityPhase creates n high-priority tasks one at a time (numbered from
// first), each once the one before has been polled, and times them.
func (r *runner) priorityPhase(ctx context.Context, db *pgxpool.Pool, polled <-chan highPoll, clock *claimClock, first int) (priorityPhase, error) {
	var ph priorityPhase
	for i := range r.opts.N {
		seq := first + i
		time.Sleep(r.opts.Gap)
		tx, err := db.Begin(ctx)
		if err != nil {
			return ph, err
		}
		_, err = tasks.Create(ctx, tx, tasks.Spec{Type: priorityType, State: priorityOrder{High: true, Seq: seq}, Priority: highPriority})
		if err != nil {
			_ = tx.Rollback(ctx)
			return ph, err
		}
		t0 := time.Now()
		if err := tx.Commit(ctx); err != nil {
			return ph, err
		}
		ph.commit = append(ph.commit, time.Since(t0))
		select {
		case p := <-polled:
			if p.seq != seq {
				return ph, fmt.Errorf("high-priority task %d was polled while %d was awaited", p.seq, seq)
			}
			x := prioritySample{latency: p.start.Sub(t0)}
			if c, ok := clock.before(p.start); ok {
				x.wait, x.claim, x.start = c.start.Sub(t0), c.end.Sub(c.start), p.start.Sub(c.end)
			}
			ph.samples = append(ph.samples, x)
		case <-time.After(time.Minute):
			return ph, fmt.Errorf("high-priority task %d was not polled within a minute", seq)
		case <-ctx.Done():
			return ph, ctx.Err()
		}
	}
	return ph, nil
}

// refiller keeps priority's backlog near target: whenever the tasks
// created less those polled are step or more below it, it creates enough to
// bring them back to target (a trickle of small batches rather than a
// burst of inserts now and then).
type refiller struct {
	r      *runner
	db     *pgxpool.Pool
	low    *atomic.Int64 // backlog polls started
	target int
	step   int
	mu     sync.Mutex
	// created counts the backlog tasks created; min is the lowest backlog
	// seen; more is how many were added to the first target.
	created, min, more int64
}

func (f *refiller) loop(ctx context.Context) error {
	tick := time.NewTicker(backlogRefillEvery)
	defer tick.Stop()
	for {
		f.mu.Lock()
		left := f.created - f.low.Load()
		f.min = min(f.min, max(left, 0))
		f.mu.Unlock()
		if left <= int64(f.target-f.step) {
			n := f.target - int(left)
			if _, _, err := f.r.createTasks(ctx, f.db, n, tasks.Spec{Type: priorityType, State: priorityOrder{}}); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("refill the backlog: %w", err)
			}
			f.mu.Lock()
			f.created += int64(n)
			f.more += int64(n)
			f.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (f *refiller) lowest() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.min
}

func (f *refiller) added() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.more
}
