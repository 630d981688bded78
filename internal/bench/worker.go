package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

// WorkerEnv is the environment variable that turns a process into a bench
// worker: `corotask bench oneshot -executors N` (and `bench pressure`, `bench limit`)
// re-executes its own binary (os.Executable) N times with it set, and each
// of those processes runs one executor until its standard input closes or it
// receives SIGTERM, which it takes as a service would: a graceful stop. See
// MaybeWorker.
const WorkerEnv = "COROTASK_BENCH_WORKER"

// workerReady begins the line a worker prints once its executor runs; the
// executor's ID follows it.
const workerReady = "corotask-bench-worker ready"

// MaybeWorker makes this process a bench worker, and exits it when done,
// if it was started as one (WorkerEnv is set); otherwise it returns at once.
// Call it first thing in main of any binary that runs Run with
// Options.Executors > 1 (the corotask CLI), and in TestMain of tests that
// do. A binary that does not call it can still use Options.InProcess.
func MaybeWorker() {
	spec := os.Getenv(WorkerEnv)
	if spec == "" {
		return
	}
	os.Exit(worker(spec, os.Stdin, os.Stdout, os.Stderr))
}

// workerSpec is what a worker is asked to do, passed as JSON in WorkerEnv.
type workerSpec struct {
	URL         string `json:"url"`
	DB          string `json:"db,omitempty"`
	Kind        string `json:"kind"` // "oneshot", "pressure" or "limit"
	Concurrency int    `json:"concurrency"`
	Pool        int    `json:"pool"`
	CPUProfile  string `json:"cpuprofile,omitempty"`
	OTel        bool   `json:"otel,omitempty"`
	NoHistory   bool   `json:"no_history,omitempty"`
	// PollTime is how long each poll of kind "limit" takes (a sleep).
	PollTime time.Duration `json:"poll_time,omitempty"`
	// Hold makes the worker wait, once ready, for a line on its standard
	// input before it runs its executor, so that several workers start
	// polling together.
	Hold bool `json:"hold,omitempty"`
}

// workerReport is what a worker says when it stops, as one JSON line.
type workerReport struct {
	FirstPollUnixNano int64 `json:"first_poll_unix_nano"`
	Polls             int64 `json:"polls"`
	CPUNano           int64 `json:"cpu_nano"`
	PeakRSS           int64 `json:"peak_rss_bytes"`
	HeapInuse         int64 `json:"heap_inuse_bytes"`
	// Logs counts the executor's log records by level and message.
	Logs map[string]int64 `json:"logs,omitempty"`
	// Intervals are the start and end of each poll of kind "limit", in
	// UnixNano: start, end, start, end, ...
	Intervals []int64 `json:"intervals,omitempty"`
	Error     string  `json:"error,omitempty"`
}

// worker runs one executor as spec says until stdin closes or SIGTERM
// comes, then prints its report on stdout; it returns the process's exit
// code.
func worker(specJSON string, stdin io.Reader, stdout, stderr io.Writer) int {
	var spec workerSpec
	fail := func(err error) int {
		fmt.Fprintf(stderr, "corotask bench worker: %v\n", err)
		b, _ := json.Marshal(workerReport{Error: err.Error()})
		fmt.Fprintf(stdout, "%s\n", b)
		return 1
	}
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fail(fmt.Errorf("bad %s: %w", WorkerEnv, err))
	}
	if spec.Kind != "oneshot" && spec.Kind != "pressure" && spec.Kind != "limit" {
		return fail(fmt.Errorf("unknown worker kind %q", spec.Kind))
	}
	// SIGTERM is a graceful stop, as for a service: Run's context ends,
	// Run returns once its polls have, and the process exits.
	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pool, err := openPool(ctx, spec.URL, spec.DB, spec.Pool)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	tally := newLogTally(stderr)
	cfg := executor.Config{Concurrency: spec.Concurrency, Logger: slog.New(tally)}
	if spec.Kind == "oneshot" || spec.Kind == "limit" {
		cfg.Retention = -1 // the scenario counts the tasks it ran
	}
	if spec.OTel {
		if cfg.Hooks, err = otelHooks(); err != nil {
			return fail(err)
		}
	}
	e, err := executor.New(pool, cfg)
	if err != nil {
		return fail(err)
	}
	var first firstTime
	var polls atomic.Int64
	history := executor.History(!spec.NoHistory)
	var spans *pollSpans
	switch spec.Kind {
	case "pressure":
		executor.Register(e, pressureType, pressurePoller(&polls), history)
	case "limit":
		spans = &pollSpans{}
		executor.Register(e, limitType, limitPoller(spec.PollTime, &first, &polls, spans), history)
	default:
		executor.Register(e, oneshotType, oneshotPoller(&first, &polls), history)
	}
	if spec.CPUProfile != "" {
		f, err := os.Create(spec.CPUProfile)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(err)
		}
	}
	done := make(chan error, 1)
	in := bufio.NewReader(stdin)
	if spec.Hold {
		fmt.Fprintln(stdout, workerReady, e.ID())
		if _, err := in.ReadString('\n'); err != nil {
			cancel() // stdin closed before the go: stop at once
		}
	}
	go func() { done <- e.Run(ctx) }()
	if !spec.Hold {
		fmt.Fprintln(stdout, workerReady, e.ID())
	}
	go func() {
		_, _ = io.Copy(io.Discard, in)
		cancel()
	}()
	select {
	case err = <-done: // Run failed on its own
	case <-ctx.Done():
		err = <-done
	}
	if spec.CPUProfile != "" {
		pprof.StopCPUProfile()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	_, peak := rssBytes()
	rep := workerReport{Polls: polls.Load(), CPUNano: int64(selfCPU()), PeakRSS: peak, HeapInuse: int64(ms.HeapInuse),
		Logs: tally.counts()}
	if spans != nil {
		rep.Intervals = spans.flat()
	}
	if t := first.get(); !t.IsZero() {
		rep.FirstPollUnixNano = t.UnixNano()
	}
	if err != nil {
		rep.Error = err.Error()
	}
	b, _ := json.Marshal(rep)
	fmt.Fprintf(stdout, "%s\n", b)
	if err != nil {
		return 1
	}
	return 0
}

// workerProc is a running worker process.
type workerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	id    tasks.ID // its executor's, from its ready line
}

// procs is the worker processes of one scenario.
type procs []*workerProc

// workerSpec is the spec of a worker of this scenario, of kind, with
// concurrency slots; the n-th worker (from 1) writes its CPU profile to
// Options.CPUProfile.n.
func (r *runner) workerSpec(kind string, concurrency, n int) workerSpec {
	spec := workerSpec{URL: r.url, DB: r.db, Kind: kind, Concurrency: concurrency, Pool: r.opts.Pool, OTel: r.opts.OTel,
		NoHistory: r.opts.History == "off"}
	if r.opts.CPUProfile != "" {
		spec.CPUProfile = fmt.Sprintf("%s.%d", r.opts.CPUProfile, n)
	}
	return spec
}

// startWorkers starts one worker process per entry of concurrency, and
// waits until each runs its executor.
func (r *runner) startWorkers(ctx context.Context, kind string, concurrency []int) (procs, error) {
	var ps procs
	for i, c := range concurrency {
		p, err := r.startWorker(ctx, r.workerSpec(kind, c, i+1))
		if err != nil {
			ps.kill()
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// startWorker starts one worker process, and waits until it runs its
// executor.
func (r *runner) startWorker(ctx context.Context, spec workerSpec) (*workerProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary to start workers: %w", err)
	}
	b, _ := json.Marshal(spec)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), WorkerEnv+"="+string(b))
	cmd.Stderr = r.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %s: %w", exe, err)
	}
	p := &workerProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	line, err := p.readLine(ctx, 30*time.Second)
	rest, ok := strings.CutPrefix(line, workerReady+" ")
	if err == nil && ok {
		p.id, err = tasks.ParseID(rest)
	}
	if err != nil || !ok {
		procs{p}.kill()
		return nil, fmt.Errorf("worker process %s did not start (%q, %v): does this binary call bench.MaybeWorker first thing in main? Use -in-process otherwise",
			exe, line, err)
	}
	return p, nil
}

// release tells held workers (workerSpec.Hold) to start polling.
func (ps procs) release() error {
	for i, p := range ps {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			return fmt.Errorf("release worker %d: %w", i+1, err)
		}
	}
	return nil
}

// readLine reads one line of the worker's stdout, waiting at most timeout.
func (p *workerProc) readLine(ctx context.Context, timeout time.Duration) (string, error) {
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := p.out.ReadString('\n')
		ch <- res{strings.TrimSpace(s), err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-t.C:
		return "", errors.New("timed out")
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// stop closes the workers' stdin, which stops their executors gracefully,
// and collects their reports.
func (ps procs) stop(ctx context.Context) ([]workerReport, error) {
	for _, p := range ps {
		p.stdin.Close()
	}
	var reps []workerReport
	var errs []error
	for i, p := range ps {
		rep, err := p.report(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("worker %d: %w", i+1, err))
		}
		reps = append(reps, rep)
	}
	return reps, errors.Join(errs...)
}

// report reads the report a stopping worker prints, and waits for it to
// exit; one that has not said it within a minute is killed.
func (p *workerProc) report(ctx context.Context) (workerReport, error) {
	line, err := p.readLine(ctx, time.Minute)
	var rep workerReport
	if err == nil {
		err = json.Unmarshal([]byte(line), &rep)
	}
	if err == nil && rep.Error != "" {
		err = errors.New(rep.Error)
	}
	if err != nil {
		_ = p.cmd.Process.Kill()
	}
	if werr := p.cmd.Wait(); err == nil && werr != nil {
		err = werr
	}
	return rep, err
}

func (ps procs) kill() {
	for _, p := range ps {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}
