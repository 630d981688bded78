// Package bench measures corotask: the scenarios behind `corotask bench`
// (and the `go test -bench` benchmarks of this package).
//
// Each scenario runs in a fresh database that it creates on the server
// (corotask_bench_<random>), migrates, and drops at the end, so a run never
// touches user data and two runs never see each other's tasks. Figures are
// printed for people, or as one JSON object per scenario with Options.JSON.
// docs/benchmarks.md describes the method and the figures measured.
//
// The CLI wires it in with a few lines:
//
//	func main() {
//		bench.MaybeWorker() // first thing: a worker process of `bench oneshot -executors N`, `bench pressure`, `bench limit`
//		...
//	}
//
//	// corotask bench SCENARIO [flags]
//	var opts bench.Options
//	opts.RegisterFlags(fs)
//	...
//	opts.Scenario, opts.DatabaseURL = args[0], databaseURL
//	return bench.Run(ctx, opts, stdout, stderr)
package bench

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options says which scenario to run and how big. Zero fields take the
// scenario's default, documented on each field and printed by `corotask bench
// --help` (see Usage).
type Options struct {
	// DatabaseURL is the server to run on (any database of it: the scenario
	// creates its own). Empty: internal/database's resolution ($DATABASE_URL,
	// 127.0.0.1:5432, else a private cluster).
	DatabaseURL string
	// StockCluster runs on a throwaway private cluster instead of
	// DatabaseURL's server: initdb'd from this machine's PostgreSQL binaries
	// (see internal/database) into a temporary directory with the stock
	// settings (autovacuum on), plus pg_stat_statements preloaded with
	// Statements, plus StockSettings; stopped and removed at the end.
	StockCluster bool
	// StockSettings are extra "name = value" settings of the private
	// cluster (e.g. "autovacuum = off").
	StockSettings []string
	// Scenario is one of Scenarios(), or "all".
	Scenario string

	// N is how many of the scenario's unit to run: tasks for oneshot
	// (50,000) and create (100,000), tasks per round for limit (20,000) and
	// keylimit (50,000), high-priority tasks for priority (200), round
	// trips for pingpong (2,000), task
	// lifecycles for bloat (200,000), sends timed per level for send (200),
	// send_to_key calls for sendkey (2,000: half to new keys, half to
	// existing ones), and fib(N) for tree (20, 21,891 tasks).
	N int
	// Workers is how many polls run at once, in total over all executors
	// (executor.Config.Concurrency): oneshot, tree, fanin, bloat, pressure,
	// limit, priority, keylimit. Default 100 (pressure 64, limit 32).
	Workers int
	// Executors is how many executors share the oneshot, pressure, limit
	// or keylimit work, each with its own pool and Workers/Executors slots.
	// Default 1 (pressure with Mode "stop", and limit: 2). oneshot runs
	// more than one, and pressure and limit any number, as worker processes
	// (this binary re-executed; see MaybeWorker) unless InProcess.
	Executors int
	// InProcess runs every executor in this process (each with its own
	// pool) instead of in worker processes.
	InProcess bool
	// Pool is the most connections each executor's pool opens. Default 20.
	Pool int
	// Batch is how many tasks one CreateMany call creates. Default 1,000.
	Batch int
	// Writers is how many CreateMany calls the create scenario runs at once.
	// Default 1.
	Writers int
	// K is fanin's number of children (1,000); the tree's branching factor
	// with Shape "kary" (10); idle's ready tasks per claim (10).
	K int
	// M is how many polls the heartbeat scenario keeps in flight. Default 10,000.
	M int
	// Shape is the tree: "fib" (fibonacci, N) or "kary" (K children per
	// task, Depth levels below the root). Default "fib".
	Shape string
	// Depth is the depth of the kary tree. Default 4.
	Depth int
	// Wait is how tree and fanin parents wait for their children: "await"
	// (executor.AwaitChildren: polled once more, when the last has ended)
	// or "suspend" (executor.Suspend: polled at each completion, or batch of
	// completions). Default "await".
	Wait string
	// Duration is how long the heartbeat scenario holds its polls in flight
	// once they all are (10s), and the length of the pressure scenario's
	// pressure phase (60s).
	Duration time.Duration
	// Mode is the pressure the pressure scenario applies during Duration:
	// "none" (the default), "killbackends" (pg_terminate_backend on every
	// session of the scenario's database, KillRate times a second),
	// "idletx" (one transaction holding a transaction ID open), "readers"
	// (Readers sessions scanning the tasks table in REPEATABLE READ
	// transactions, back to back) or "stop" (Stops worker processes stopped
	// with SIGTERM and replaced).
	Mode string
	// Rate is how many tasks a second the pressure scenario creates, from
	// the start of Warmup to the end of After. Default 800.
	Rate int
	// Warmup is the pressure scenario's phase at Rate before the pressure.
	// Default 10s.
	Warmup time.Duration
	// After is the pressure scenario's phase at Rate once the pressure has
	// ended, before the producer stops. Default 30s.
	After time.Duration
	// KillRate is how many times a second Mode "killbackends" terminates
	// the sessions. Default 2.
	KillRate float64
	// Readers is how many sessions Mode "readers" runs. Default 4.
	Readers int
	// Stops is how many times Mode "stop" stops a worker process, evenly
	// over Duration. Default 10.
	Stops int
	// HeartbeatInterval is the executor's heartbeat interval in the heartbeat
	// scenario. Default 1s.
	HeartbeatInterval time.Duration
	// Gap is the pause between pingpong round trips, once the previous one
	// has committed, so each message finds an idle executor. Default 5ms
	// (1ns for practically none). For priority: the pause between two
	// high-priority tasks' creates, once the previous one has been polled
	// (default 20ms).
	Gap time.Duration
	// Rounds is how many times limit and keylimit run each of their two
	// variants, alternating (without the limit, with it, without, ...).
	// Default 3 (keylimit 2).
	Rounds int
	// MaxRunning is the limit scenario's fleet-wide maximum of running
	// polls (corotask.type_controls.max_running). Default 64: more than
	// the default Workers, so that it does not bind; one below Workers
	// checks that it is enforced.
	MaxRunning int
	// PollTime is how long each poll of the limit scenario, and of the
	// priority scenario's backlog, takes (a sleep). Default 1ms.
	PollTime time.Duration
	// PrioritySlots is the priority scenario's executor's
	// Config.PrioritySlots. Default 0: none.
	PrioritySlots int
	// Backlog is how many ready low-priority tasks the priority scenario
	// keeps in the queue while it measures (topped up as they are polled).
	// Default 100,000.
	Backlog int
	// LimitKeys is how many distinct limit keys keylimit spreads its tasks
	// over. Default 10,000.
	LimitKeys int
	// KeyMax is keylimit's key space maximum of running tasks per key
	// (corotask.key_limits.max_running). Default 1.
	KeyMax int
	// Levels are idle's numbers of background tasks in each state (default
	// 0, 10,000 and 100,000), and the numbers of messages waiting in the
	// task's inbox for send (0 and 50,000) and inboxpoll (100 and 50,000;
	// at least 1 each).
	Levels []int
	// Iterations is how many claims idle times at each level, and how many
	// polls inboxpoll times at each level. Default 300.
	Iterations int
	// Messages is how many messages each bloat lifecycle carries: the task
	// is created with the first, and each poll that pops one sends the task
	// the next (Task.Send to itself) and suspends, until the poll that pops
	// the last ends it. Default 2; negative for none (each task polled once
	// to Done, with no message), which the flag -messages 0 sets.
	Messages int
	// Retention is the executor's retention of ended tasks in the bloat
	// scenario. Default 2s.
	Retention time.Duration
	// SampleEvery is how often bloat samples the table's size. Default 5s.
	SampleEvery time.Duration

	// History is whether the executors record their polls in
	// corotask.history: "on" (the default), "off", or "both": the
	// scenario runs with history off, then on, back to back, and the second
	// result compares its headline figure with the first's.
	History string
	// Keys is whether the create scenario gives each task a key of its own
	// ("k-0", "k-1", ...: tasks.Spec.Key): "off" (the default), "on", or
	// "both": without keys, then with them, back to back, and the second
	// result compares its tasks/s with the first's.
	Keys string

	// JSON prints one JSON object per scenario instead of text.
	JSON bool
	// CPUProfile writes a CPU profile of the scenario's executors to this
	// file (with -executors N in processes: FILE.1 ... FILE.N).
	CPUProfile string
	// MemProfile writes a heap profile of the heartbeat scenario's process
	// while its M polls are held (and FILE.goroutine, their goroutines).
	MemProfile string
	// Statements adds the scenario's top statements from pg_stat_statements,
	// when the server preloads it.
	Statements bool
	// KeepDatabase leaves the scenario's database in place, for a look with
	// EXPLAIN afterwards; its name is printed.
	KeepDatabase bool
	// OTel turns on the executors' OpenTelemetry hooks (otelcorotask, on
	// an SDK that keeps everything in memory and exports nothing), to
	// measure what the instrumentation costs.
	OTel bool
	// NoEager turns off eager children in the executors
	// (executor.Config.DisableEagerChildren): every child is claimed.
	NoEager bool
	// NoAnalyze skips the ANALYZE that scenarios run after creating their
	// tasks in bulk (autovacuum would do it, later).
	NoAnalyze bool
}

// scenario is one benchmark.
type scenario struct {
	name    string
	summary string
	run     func(ctx context.Context, r *runner, res *Result) error
	// headline is the metric -history both compares; higher is better.
	headline string
}

var scenarios = []scenario{
	{"oneshot", "N tasks created in bulk, each polled once to Done: tasks/s from the first claim to the last commit", runOneshot, "tasks_per_sec"},
	{"create", "N tasks created with CreateMany in batches of -batch, with -keys or without: tasks/s", runCreate, ""},
	{"tree", "fan-out/fan-in: fibonacci(N) or a k-ary tree of tasks that spawn children and sum their results", runTree, "tasks_per_sec"},
	{"pingpong", "N messages sent to a suspended task: latency from Send to the start of the poll that sees it", runPingPong, "round_trips_per_sec"},
	{"fanin", "K children each completing into one parent: time until the parent has all K", runFanin, ""},
	{"heartbeat", "M polls in flight for -duration: heartbeat statements/s, executor CPU and memory", runHeartbeat, ""},
	{"idle", "claim cost with -levels tasks sleeping, suspended or running, relative to none", runIdle, ""},
	{"bloat", "N task lifecycles (create, claim, commit done, retention delete), each with -messages messages: tables' size and dead tuples over time", runBloat, "lifecycles_per_sec"},
	{"send", "one inbox.Send to a task with -levels messages already waiting: ms per send, relative to the lowest level", runSend, ""},
	{"sendkey", "N inbox.SendToKey calls, half creating a task for a new key, half to an existing key's task, beside inbox.Send to a known ID: ms per call", runSendKey, ""},
	{"inboxpoll", "one poll (PollOnce) of a task with -levels messages waiting, popping all it is shown: ms per poll, relative to the lowest level", runInboxPoll, ""},
	{"pressure", "-rate tasks/s through -warmup, -duration under -mode pressure, then -after: pickup latency, throughput, backlog, recovery", runPressure, ""},
	{"limit", "N tasks per round polled by -executors processes, without a fleet-wide -max-running and with it, alternating for -rounds: tasks/s, and the most polls seen at once (fails above the limit)", runLimit, ""},
	{"priority", "N high-priority tasks, one at a time: latency from create to poll on an empty queue, then behind a -backlog of ready low-priority tasks", runPriority, ""},
	{"keylimit", "N tasks over -limit-keys keys of a key space with -key-max per key, and without keys, alternating for -rounds: tasks/s and mean claim time", runKeyLimit, ""},
}

// Scenarios returns the names of the scenarios, in the order "all" runs them.
func Scenarios() []string {
	out := make([]string, len(scenarios))
	for i, s := range scenarios {
		out[i] = s.name
	}
	return out
}

// Usage describes the scenarios, for `corotask bench --help`.
var Usage = func() string {
	var b strings.Builder
	b.WriteString(`Run a benchmark scenario (or "all") in a fresh database created on the
server for it and dropped at the end, and print its figures (--json: one JSON
object per scenario). See docs/benchmarks.md for the method.

Scenarios:
`)
	for _, s := range scenarios {
		fmt.Fprintf(&b, "  %-10s %s\n", s.name, s.summary)
	}
	b.WriteString(`  all        every scenario above, in this order, each at its default size

Sizes default to the targets of docs/benchmarks.md; use smaller ones (e.g.
-n 5000) for a quick look.`)
	return b.String()
}()

// RegisterFlags declares the flags of `corotask bench` on fs, bound to o.
// DatabaseURL and Scenario are left to the caller (the CLI's --database-url
// and first argument).
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.N, "n", o.N, "`N`: tasks (oneshot 50000, create 100000, limit 20000 per round, keylimit 50000 per round), high-priority tasks (priority 200), round trips (pingpong 2000), lifecycles (bloat 200000), sends per level (send 200), send_to_key calls (sendkey 2000), fib(N) (tree 20)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "polls at once over all executors, `N` (default 100, pressure 64, limit 32)")
	fs.IntVar(&o.Executors, "executors", o.Executors, "oneshot, pressure, limit: executor processes (keylimit: executors in this process), `N` (default 1; pressure -mode stop and limit 2)")
	fs.BoolVar(&o.InProcess, "in-process", o.InProcess, "oneshot, pressure, limit: run the executors in this process, not as worker processes")
	fs.IntVar(&o.Pool, "pool", o.Pool, "connections per executor pool, `N` (default 20)")
	fs.IntVar(&o.Batch, "batch", o.Batch, "tasks per CreateMany call, `N` (default 1000)")
	fs.IntVar(&o.Writers, "writers", o.Writers, "create: concurrent CreateMany callers, `N` (default 1)")
	fs.IntVar(&o.K, "k", o.K, "fanin children (1000), kary tree branching (10), idle ready tasks per claim (10): `K`")
	fs.IntVar(&o.M, "m", o.M, "heartbeat: polls in flight, `M` (default 10000)")
	fs.StringVar(&o.Shape, "shape", o.Shape, "tree: `SHAPE` fib or kary (default fib)")
	fs.IntVar(&o.Depth, "depth", o.Depth, "tree: depth of the kary tree, `N` (default 4)")
	fs.StringVar(&o.Wait, "wait", o.Wait, "tree, fanin: parents wait for their children with `MODE` await (AwaitChildren) or suspend (Suspend, woken at each completion) (default await)")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "heartbeat: how long to hold the polls in flight (default 10s); pressure: the pressure phase (default 60s)")
	fs.StringVar(&o.Mode, "mode", o.Mode, "pressure: `MODE` none, killbackends, idletx, readers or stop (default none)")
	fs.IntVar(&o.Rate, "rate", o.Rate, "pressure: tasks created a second, `R` (default 800)")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "pressure: the phase at -rate before the pressure (default 10s)")
	fs.DurationVar(&o.After, "after", o.After, "pressure: the phase at -rate after the pressure, before the producer stops (default 30s)")
	fs.Float64Var(&o.KillRate, "kill-rate", o.KillRate, "pressure -mode killbackends: rounds of pg_terminate_backend a second, `N` (default 2)")
	fs.IntVar(&o.Readers, "readers", o.Readers, "pressure -mode readers: sessions scanning the tasks table in REPEATABLE READ transactions, `N` (default 4)")
	fs.IntVar(&o.Stops, "stops", o.Stops, "pressure -mode stop: worker processes stopped with SIGTERM, then replaced, `N` (default 10)")
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", o.HeartbeatInterval, "heartbeat: the executor's heartbeat interval (default 1s)")
	fs.DurationVar(&o.Gap, "gap", o.Gap, "pingpong: pause between round trips (default 5ms); priority: between high-priority tasks (default 20ms)")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "limit, keylimit: runs of each variant, alternating, `N` (default 3, keylimit 2)")
	fs.IntVar(&o.MaxRunning, "max-running", o.MaxRunning, "limit: the type's fleet-wide maximum of running polls, `N` (default 64; below -workers to check it is enforced)")
	fs.DurationVar(&o.PollTime, "poll-time", o.PollTime, "limit, priority's backlog: how long each poll takes (a sleep) (default 1ms)")
	fs.IntVar(&o.PrioritySlots, "priority-slots", o.PrioritySlots, "priority: the executor's Config.PrioritySlots, `N` (default 0: none)")
	fs.IntVar(&o.Backlog, "backlog", o.Backlog, "priority: ready low-priority tasks kept in the queue, `N` (default 100000)")
	fs.IntVar(&o.LimitKeys, "limit-keys", o.LimitKeys, "keylimit: distinct limit keys, `N` (default 10000)")
	fs.IntVar(&o.KeyMax, "key-max", o.KeyMax, "keylimit: running tasks per key, `N` (default 1)")
	fs.Var((*intList)(&o.Levels), "levels", "comma-separated counts: idle's background tasks (default 0,10000,100000); messages waiting for send (default 0,50000) and inboxpoll (default 100,50000)")
	fs.IntVar(&o.Iterations, "iterations", o.Iterations, "idle: claims, inboxpoll: polls, timed per level, `N` (default 300)")
	fs.Var((*noneIfZero)(&o.Messages), "messages", "bloat: messages per lifecycle, `N`; 0 for none (default 2)")
	fs.DurationVar(&o.Retention, "retention", o.Retention, "bloat: retention of ended tasks (default 2s)")
	fs.DurationVar(&o.SampleEvery, "sample-every", o.SampleEvery, "bloat: sampling interval of the table size (default 5s)")
	fs.StringVar(&o.History, "history", o.History, "record polls in corotask.history, `MODE` on, off or both (off then on, back to back, compared) (default on)")
	fs.StringVar(&o.Keys, "keys", o.Keys, "create: a key per task, `MODE` off, on or both (off then on, back to back, compared) (default off)")
	fs.BoolVar(&o.StockCluster, "stock-cluster", o.StockCluster, "run on a throwaway private cluster with stock settings (autovacuum on), initdb'd from this machine's PostgreSQL binaries and removed afterwards")
	fs.Var((*stringList)(&o.StockSettings), "stock-setting", "with -stock-cluster: an extra server setting `'NAME = VALUE'` (repeatable)")
	fs.BoolVar(&o.JSON, "json", o.JSON, "print one JSON object per scenario")
	fs.StringVar(&o.CPUProfile, "cpuprofile", o.CPUProfile, "write a CPU profile of the executors to `FILE`")
	fs.StringVar(&o.MemProfile, "memprofile", o.MemProfile, "heartbeat: write a heap profile (and FILE.goroutine) while the polls are held to `FILE`")
	fs.BoolVar(&o.Statements, "statements", o.Statements, "report the top statements from pg_stat_statements (if preloaded)")
	fs.BoolVar(&o.KeepDatabase, "keep-database", o.KeepDatabase, "do not drop the scenario's database")
	fs.BoolVar(&o.NoAnalyze, "no-analyze", o.NoAnalyze, "do not ANALYZE after bulk creation")
	fs.BoolVar(&o.NoEager, "no-eager", o.NoEager, "tree, fanin: executors create no children claimed; each is claimed (executor.Config.DisableEagerChildren)")
	fs.BoolVar(&o.OTel, "otel", o.OTel, "record OpenTelemetry metrics and spans in the executors (in memory, not exported)")
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, "; ")
}

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// intList is a comma-separated list of ints, as a flag.Value.
type intList []int

func (l *intList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(s string) error {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
		if err != nil || v < 0 {
			return fmt.Errorf("not a count: %q", f)
		}
		out = append(out, v)
	}
	*l = out
	return nil
}

// noneIfZero is a count flag whose 0 means none, stored as -1 (0 is the
// field's "default").
type noneIfZero int

func (n *noneIfZero) String() string {
	if n == nil || *n == 0 {
		return ""
	}
	return strconv.Itoa(max(int(*n), 0))
}

func (n *noneIfZero) Set(s string) error {
	v, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(s), "_", ""))
	if err != nil || v < 0 {
		return fmt.Errorf("not a count: %q", s)
	}
	*n = noneIfZero(cmp.Or(v, -1))
	return nil
}

// withDefaults fills the zero fields of o with the defaults of scenario name.
func (o Options) withDefaults(name string) Options {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defD := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	switch name {
	case "oneshot":
		def(&o.N, 50_000)
	case "create":
		def(&o.N, 100_000)
	case "pingpong":
		def(&o.N, 2_000)
	case "bloat":
		def(&o.N, 200_000)
		def(&o.Messages, 2)
	case "send":
		def(&o.N, 200)
	case "sendkey":
		def(&o.N, 2_000)
	case "tree":
		def(&o.N, 20)
	case "limit":
		def(&o.N, 20_000)
		def(&o.Workers, 32)
		def(&o.Executors, 2)
	case "keylimit":
		def(&o.N, 50_000)
		def(&o.Rounds, 2)
	case "priority":
		def(&o.N, 200)
		defD(&o.Gap, 20*time.Millisecond)
	case "pressure":
		def(&o.Workers, 64)
		defD(&o.Duration, time.Minute)
		if o.Mode == "stop" {
			def(&o.Executors, 2)
		}
	}
	def(&o.Workers, 100)
	def(&o.Executors, 1)
	def(&o.Pool, 20)
	def(&o.Batch, 1_000)
	def(&o.Writers, 1)
	switch name {
	case "fanin":
		def(&o.K, 1_000)
	default:
		def(&o.K, 10)
	}
	def(&o.M, 10_000)
	def(&o.Depth, 4)
	def(&o.Iterations, 300)
	if o.Shape == "" {
		o.Shape = "fib"
	}
	if o.Wait == "" {
		o.Wait = "await"
	}
	if o.Levels == nil {
		switch name {
		case "send":
			o.Levels = []int{0, 50_000}
		case "inboxpoll":
			o.Levels = []int{100, 50_000}
		default:
			o.Levels = []int{0, 10_000, 100_000}
		}
	}
	defD(&o.Duration, 10*time.Second)
	defD(&o.HeartbeatInterval, time.Second)
	defD(&o.Gap, 5*time.Millisecond)
	defD(&o.Retention, 2*time.Second)
	defD(&o.SampleEvery, 5*time.Second)
	if o.Mode == "" {
		o.Mode = "none"
	}
	def(&o.Rate, 800)
	defD(&o.Warmup, 10*time.Second)
	defD(&o.After, 30*time.Second)
	if o.KillRate == 0 {
		o.KillRate = 2
	}
	def(&o.Readers, 4)
	def(&o.Stops, 10)
	def(&o.Rounds, 3)
	def(&o.MaxRunning, 64)
	defD(&o.PollTime, time.Millisecond)
	def(&o.Backlog, 100_000)
	def(&o.LimitKeys, 10_000)
	def(&o.KeyMax, 1)
	if o.History == "" {
		o.History = "on"
	}
	if o.Keys == "" {
		o.Keys = "off"
	}
	return o
}

func (o Options) validate() error {
	for _, v := range []struct {
		name string
		v    int
	}{{"n", o.N}, {"workers", o.Workers}, {"executors", o.Executors}, {"pool", o.Pool}, {"batch", o.Batch},
		{"writers", o.Writers}, {"k", o.K}, {"m", o.M}, {"depth", o.Depth}, {"iterations", o.Iterations},
		{"rate", o.Rate}, {"readers", o.Readers}, {"stops", o.Stops}, {"rounds", o.Rounds}, {"max-running", o.MaxRunning},
		{"backlog", o.Backlog}, {"priority-slots", o.PrioritySlots}, {"limit-keys", o.LimitKeys}, {"key-max", o.KeyMax}} {
		if v.v < 0 {
			return fmt.Errorf("-%s must not be negative", v.name)
		}
	}
	if o.Warmup < 0 || o.After < 0 || o.Duration < 0 || o.KillRate < 0 || o.PollTime < 0 {
		return errors.New("-warmup, -after, -duration, -kill-rate and -poll-time must not be negative")
	}
	if o.Mode != "" && !slices.Contains(pressureModes, o.Mode) {
		return fmt.Errorf("-mode must be one of %s, not %q", strings.Join(pressureModes, ", "), o.Mode)
	}
	if o.Mode == "stop" && (o.Executors == 1 || o.InProcess) {
		return errors.New("pressure -mode stop stops worker processes while others go on: it needs -executors 2 or more, not -in-process")
	}
	if o.Pool == 1 {
		return errors.New("-pool must be at least 2 (the executor holds one connection for LISTEN)")
	}
	if o.Executors > o.Workers && o.Workers > 0 {
		return fmt.Errorf("-executors %d is more than -workers %d", o.Executors, o.Workers)
	}
	if o.History != "" && o.History != "on" && o.History != "off" && o.History != "both" {
		return fmt.Errorf("-history must be on, off or both, not %q", o.History)
	}
	if o.Keys != "" && o.Keys != "on" && o.Keys != "off" && o.Keys != "both" {
		return fmt.Errorf("-keys must be on, off or both, not %q", o.Keys)
	}
	if (o.Keys == "on" || o.Keys == "both") && o.Scenario != "create" {
		return errors.New("-keys is for the create scenario")
	}
	if o.Keys == "both" && o.History == "both" {
		return errors.New("-keys both and -history both each run the scenario twice: use one at a time")
	}
	if o.Scenario == "sendkey" && o.N == 1 {
		return errors.New("sendkey: -n must be at least 2 (half to new keys, half to existing ones)")
	}
	if o.Shape != "" && o.Shape != "fib" && o.Shape != "kary" {
		return fmt.Errorf("-shape must be fib or kary, not %q", o.Shape)
	}
	if o.Wait != "" && o.Wait != "await" && o.Wait != "suspend" {
		return fmt.Errorf("-wait must be await or suspend, not %q", o.Wait)
	}
	if len(o.StockSettings) > 0 && !o.StockCluster {
		return errors.New("-stock-setting needs -stock-cluster")
	}
	if o.Scenario == "inboxpoll" && slices.Contains(o.Levels, 0) {
		return errors.New("inboxpoll: -levels must be at least 1 message each (a poll with none to pop would leave the task suspended)")
	}
	if o.Shape != "kary" && o.N > 30 && o.Scenario == "tree" {
		return fmt.Errorf("tree: fib(%d) makes too many tasks; use -n 30 or less", o.N)
	}
	return nil
}

// Run runs the scenario opts.Scenario (or all of them) and prints its
// figures on stdout, and its progress on stderr.
func Run(ctx context.Context, opts Options, stdout, stderr io.Writer) error {
	var todo []scenario
	switch opts.Scenario {
	case "":
		return fmt.Errorf("no scenario: name one of %s, or all", strings.Join(Scenarios(), ", "))
	case "all":
		todo = scenarios
	default:
		i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == opts.Scenario })
		if i < 0 {
			return fmt.Errorf("unknown scenario %q: name one of %s, or all", opts.Scenario, strings.Join(Scenarios(), ", "))
		}
		todo = scenarios[i : i+1]
	}
	if err := opts.validate(); err != nil {
		return err
	}
	if opts.OTel {
		if _, err := otelHooks(); err != nil {
			return err
		}
	}
	url := opts.DatabaseURL
	if opts.StockCluster {
		u, remove, err := startStockCluster(ctx, opts, stderr)
		if err != nil {
			return err
		}
		defer remove()
		url = u
	}
	srv, err := openServer(ctx, url)
	if err != nil {
		return err
	}
	srv.env.Private = opts.StockCluster
	printed := 0
	var failed []error // results printed that failed their check
	for _, s := range todo {
		o := opts.withDefaults(s.name)
		o.Scenario = s.name
		if opts.Scenario == "all" && o.CPUProfile != "" {
			o.CPUProfile = opts.CPUProfile + "." + s.name
		}
		var prev *Result
		for _, v := range o.variants() {
			res, err := runOne(ctx, srv, s, v, stderr)
			if err != nil {
				return fmt.Errorf("bench %s (%s): %w", s.name, v.variantLabel(), err)
			}
			if prev != nil {
				compareVariants(s, o, prev, res)
			}
			prev = res
			if opts.JSON {
				if err := res.writeJSON(stdout); err != nil {
					return err
				}
			} else {
				if printed > 0 {
					fmt.Fprintln(stdout)
				}
				res.writeText(stdout, printed == 0)
			}
			printed++
			if check := resultChecks[s.name]; check != nil {
				if err := check(res); err != nil {
					failed = append(failed, fmt.Errorf("bench %s (%s): %w", s.name, v.variantLabel(), err))
				}
			}
		}
	}
	return errors.Join(failed...)
}

// runOne runs one scenario in a fresh database.
func runOne(ctx context.Context, srv *server, s scenario, o Options, stderr io.Writer) (*Result, error) {
	// How busy the machine is before we start: others' load skews figures.
	before := sampleCPU(ctx, nil)
	time.Sleep(300 * time.Millisecond)
	load := before.until(sampleCPU(ctx, nil))
	db, err := srv.freshDatabase(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if o.KeepDatabase {
			fmt.Fprintf(stderr, "bench %s: kept database %s\n", s.name, db.name)
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := srv.drop(dctx, db.name); err != nil {
			fmt.Fprintf(stderr, "bench %s: drop database %s: %v\n", s.name, db.name, err)
		}
	}()
	r := newRunner(db.url, "", o, stderr)
	res := &Result{Scenario: s.name, Env: srv.env, Started: time.Now()}
	res.param("history", o.History)
	if s.name == "create" {
		res.param("keys", o.Keys)
	}
	if what, age := srv.horizonHolder(ctx); what != "" {
		res.param("xmin_held_sec", round(age))
		res.note("%s has been open for %.0fs: it holds back the xmin horizon of the whole server, so the index entries of claimed tasks are not marked dead and each claim walks past them (slower claims until VACUUM)", what, age)
	}
	if load.ok {
		res.param("machine_busy_before_pct", round(100*load.busy))
		if load.busy > 0.1 {
			res.note("the machine was %.0f%% busy just before this scenario (another workload): its figures may be low", 100*load.busy)
		}
	}
	if o.Statements {
		r.statements = srv.statementsAvailable(ctx, db.url)
		if !r.statements {
			res.note("pg_stat_statements is not preloaded on this server (shared_preload_libraries): no statement statistics")
		}
	}
	if err := s.run(ctx, r, res); err != nil {
		return nil, err
	}
	if r.statements {
		if err := r.collectStatements(ctx, res); err != nil {
			res.note("pg_stat_statements: %v", err)
		}
	}
	res.Elapsed = time.Since(res.Started)
	return res, nil
}
