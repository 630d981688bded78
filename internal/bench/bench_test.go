package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	_ "github.com/corotask/corotask/internal/testexit" // no race detector pause at exit
)

// TestMain lets the oneshot scenario re-execute this test binary as its
// worker processes.
func TestMain(m *testing.M) {
	MaybeWorker()
	// The scenarios mostly wait for the database: run them all at once.
	os.Exit(testdb.Main(m, 8))
}

// logWriter sends what is written to it to t.Log, line by line.
type logWriter struct {
	t  testing.TB
	mu sync.Mutex
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(p))
	for sc.Scan() {
		w.t.Log(sc.Text())
	}
	return len(p), nil
}

// record is the part of a JSON record the tests look at.
type record struct {
	Scenario string             `json:"scenario"`
	Params   map[string]any     `json:"params"`
	Metrics  map[string]float64 `json:"metrics"`
	Env      Env                `json:"env"`
	Series   []map[string]any   `json:"series"`
}

// TestScenariosSmoke runs every scenario at a tiny size, and checks that it
// completes and that its figures add up. It asserts nothing about speed.
func TestScenariosSmoke(t *testing.T) {
	t.Parallel()
	admin := testdb.AdminURL(t)
	tiny := map[string]Options{
		"oneshot":   {N: 300, Workers: 10, Executors: 2, Pool: 4, Batch: 100, OTel: true},
		"create":    {N: 500, Batch: 100, Writers: 2},
		"tree":      {N: 8, Workers: 10, Pool: 4},
		"pingpong":  {N: 20, Gap: time.Millisecond},
		"fanin":     {K: 50, Workers: 10, Pool: 4},
		"heartbeat": {M: 50, Duration: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, Pool: 4},
		"idle":      {K: 3, Levels: []int{0, 300}, Iterations: 10},
		"bloat":     {N: 3000, Workers: 10, Pool: 4, Retention: 300 * time.Millisecond, SampleEvery: 300 * time.Millisecond},
		"send":      {N: 20, Levels: []int{0, 300}},
		"sendkey":   {N: 20},
		"inboxpoll": {Levels: []int{5, 300}, Iterations: 10},
		"pressure":  {Rate: 100, Warmup: time.Second, Duration: time.Second, After: time.Second, Workers: 8, Pool: 4},
		"limit":     {N: 300, Workers: 8, Executors: 2, Pool: 4, Batch: 100, MaxRunning: 3, Rounds: 1, PollTime: 2 * time.Millisecond},
		"priority":  {N: 10, Backlog: 2000, Gap: time.Millisecond, Workers: 8, Pool: 4, PollTime: 5 * time.Millisecond, PrioritySlots: 2},
		"keylimit":  {N: 500, LimitKeys: 50, Rounds: 1, Workers: 10, Pool: 4, Batch: 100},
	}
	require.ElementsMatch(t, Scenarios(), keys(tiny), "a tiny size for every scenario")
	for _, name := range Scenarios() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := tiny[name]
			o.DatabaseURL, o.Scenario = admin, name
			rec := runScenario(t, o)
			require.Equal(t, "on", rec.Env.SynchronousCommit)
			m := rec.Metrics
			switch name {
			case "oneshot":
				require.Equal(t, 300.0, m["tasks_done"])
				require.Equal(t, 300.0, m["polls"])
				require.Positive(t, m["tasks_per_sec"])
				require.Equal(t, "processes", rec.Params["mode"])
				require.Equal(t, true, rec.Params["otel"])
			case "create":
				require.Equal(t, "off", rec.Params["keys"])
				require.Equal(t, 500.0, m["tasks"])
				require.Positive(t, m["tasks_per_sec"])
			case "tree":
				require.Equal(t, 67.0, m["tasks_done"], "fib(8) makes 67 tasks")
				require.Positive(t, m["wall_sec"])
			case "pingpong":
				require.Positive(t, m["p50_ms"])
				require.LessOrEqual(t, m["p50_ms"], m["p99_ms"])
				require.LessOrEqual(t, m["p99_ms"], m["max_ms"])
			case "fanin":
				require.Equal(t, 50.0, m["results_delivered"])
				require.Equal(t, 50.0, m["child_polls"])
				require.Positive(t, m["total_ms"])
			case "heartbeat":
				require.Positive(t, m["heartbeat_statements"])
				require.Positive(t, m["heap_inuse_bytes"]+m["go_sys_bytes"])
			case "idle":
				for _, k := range []string{"claim_ms_sleeping_0", "claim_ms_sleeping_300", "claim_ms_suspended_300", "claim_ms_running_300", "claim_ms_running_0"} {
					require.Positive(t, m[k], k)
				}
				require.Contains(t, m, "claim_ratio_running_300")
			case "bloat":
				require.Equal(t, 3000.0, m["lifecycles"])
				require.Equal(t, 2.0, rec.Params["messages"], "two messages per lifecycle by default")
				require.Equal(t, 6000.0, m["polls"], "one poll per message")
				require.GreaterOrEqual(t, len(rec.Series), 2)
				require.Contains(t, rec.Series[0], "messages_total_bytes")
				require.Contains(t, m, "messages_total_bytes_max")
			case "send":
				for _, k := range []string{"mean_ms_0", "p50_ms_0", "mean_ms_300", "p50_ms_300", "send_ratio"} {
					require.Positive(t, m[k], k)
				}
				require.LessOrEqual(t, m["p50_ms_300"], m["p99_ms_300"])
				require.Greater(t, m["row_bytes_300"], 0.0)
			case "sendkey":
				require.Equal(t, 10.0, rec.Params["calls_per_kind"])
				for _, k := range []string{"new_key", "existing_key", "send_id"} {
					require.Positive(t, m[k+"_mean_ms"], k)
					require.LessOrEqual(t, m[k+"_p50_ms"], m[k+"_p99_ms"], k)
				}
				require.Positive(t, m["new_key_vs_send_id"])
				require.Positive(t, m["existing_key_vs_send_id"])
			case "inboxpoll":
				for _, k := range []string{"mean_ms_5", "mean_ms_300", "p50_ms_300", "poll_ratio"} {
					require.Positive(t, m[k], k)
				}
				require.LessOrEqual(t, m["p50_ms_300"], m["p99_ms_300"])
				require.Equal(t, 5.0, m["popped_per_poll_5"], "a poll pops the 5 waiting")
				require.Positive(t, m["popped_per_poll_300"])
				require.LessOrEqual(t, m["popped_per_poll_300"], 300.0)
			case "pressure":
				require.Equal(t, "none", rec.Params["mode"])
				require.Equal(t, m["created_by_producer"], m["done"])
			case "limit", "priority", "keylimit":
				checkFlowSmoke(t, name, rec)
			}
		})
	}
}

// runScenario runs o (its DatabaseURL and Scenario set) and returns its
// JSON record.
func runScenario(t *testing.T, o Options) record {
	t.Helper()
	recs := runScenarios(t, o)
	require.Len(t, recs, 1)
	return recs[0]
}

// runScenarios runs o and returns its JSON records, one per run (two with
// -history both or -keys both).
func runScenarios(t *testing.T, o Options) []record {
	t.Helper()
	o.JSON = true
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, Run(ctx, o, &out, &logWriter{t: t}))
	var recs []record
	dec := json.NewDecoder(&out)
	for dec.More() {
		var rec record
		require.NoError(t, dec.Decode(&rec))
		require.Equal(t, o.Scenario, rec.Scenario)
		recs = append(recs, rec)
	}
	return recs
}

// -keys both runs create without keys, then with a key per task (the
// scenario checks every task has one), and compares the second with the
// first.
func TestCreateKeysBoth(t *testing.T) {
	t.Parallel()
	recs := runScenarios(t, Options{DatabaseURL: testdb.AdminURL(t), Scenario: "create", Keys: "both", N: 250, Batch: 100, Writers: 2})
	require.Len(t, recs, 2)
	require.Equal(t, "off", recs[0].Params["keys"])
	require.Equal(t, "on", recs[1].Params["keys"])
	for _, rec := range recs {
		require.Equal(t, 250.0, rec.Metrics["tasks"])
	}
	require.NotContains(t, recs[0].Metrics, "keys_on_vs_off")
	require.Positive(t, recs[1].Metrics["keys_on_vs_off"])
}

// -keys is create's, and runs once with -history both at most.
func TestKeysRefusedElsewhere(t *testing.T) {
	t.Parallel()
	err := Run(t.Context(), Options{Scenario: "oneshot", Keys: "on"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "-keys is for the create scenario")
	err = Run(t.Context(), Options{Scenario: "create", Keys: "both", History: "both"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "use one at a time")
	err = Run(t.Context(), Options{Scenario: "create", Keys: "yes"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "-keys must be on, off or both")
	err = Run(t.Context(), Options{Scenario: "sendkey", N: 1}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "sendkey: -n must be at least 2")
}

// With -messages 0, bloat's tasks carry no message: one poll each, as
// before messages were added.
func TestBloatWithoutMessages(t *testing.T) {
	t.Parallel()
	rec := runScenario(t, Options{DatabaseURL: testdb.AdminURL(t), Scenario: "bloat", Messages: -1, N: 500, Workers: 10, Pool: 4,
		Retention: 300 * time.Millisecond, SampleEvery: 300 * time.Millisecond})
	require.Equal(t, 0.0, rec.Params["messages"])
	require.Equal(t, 500.0, rec.Metrics["lifecycles"])
	require.NotContains(t, rec.Metrics, "polls")
	require.Contains(t, rec.Metrics, "messages_total_bytes_max")
}

// A level of no message would leave inboxpoll's task suspended, never
// polled: refused before anything runs.
func TestInboxPollRefusesEmptyLevel(t *testing.T) {
	t.Parallel()
	err := Run(t.Context(), Options{Scenario: "inboxpoll", Levels: []int{0, 10}}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "inboxpoll: -levels must be at least 1")
}

// One level only: the figures of that level, and no ratio.
func TestSendOneLevel(t *testing.T) {
	t.Parallel()
	rec := runScenario(t, Options{DatabaseURL: testdb.AdminURL(t), Scenario: "send", N: 10, Levels: []int{50}})
	require.Positive(t, rec.Metrics["mean_ms_50"])
	require.Positive(t, rec.Metrics["row_bytes_50"])
	require.NotContains(t, rec.Metrics, "send_ratio")
	require.NotContains(t, rec.Metrics, "mean_ms_0")
}

func keys(m map[string]Options) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// -stock-cluster runs a scenario on a throwaway cluster with autovacuum on,
// and removes it afterwards.
func TestStockCluster(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	o := Options{Scenario: "oneshot", N: 200, Workers: 10, Pool: 4, Batch: 100, JSON: true, StockCluster: true,
		StockSettings: []string{"work_mem = '5MB'"}}
	var progress bytes.Buffer
	require.NoError(t, Run(t.Context(), o, &out, io.MultiWriter(&progress, &logWriter{t: t})))
	var rec record
	require.NoError(t, json.Unmarshal(out.Bytes(), &rec), out.String())
	require.True(t, rec.Env.Private)
	require.Equal(t, "on", rec.Env.Autovacuum)
	require.Equal(t, 200.0, rec.Metrics["tasks_done"])
	require.Zero(t, rec.Metrics["table_seq_scans"], "no sequential scan of corotask.tasks while the tasks run")
	_, dir, ok := strings.Cut(progress.String(), "starting a private cluster in ")
	require.True(t, ok, progress.String())
	dir, _, _ = strings.Cut(dir, "\n")
	_, err := os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "the cluster is removed")

	require.ErrorContains(t, Run(t.Context(), Options{Scenario: "oneshot", StockSettings: []string{"a = b"}}, io.Discard, io.Discard),
		"-stock-setting needs -stock-cluster")
}

func TestRunRefusesUnknownScenario(t *testing.T) {
	t.Parallel()
	err := Run(context.Background(), Options{Scenario: "nope"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, `unknown scenario "nope"`)
	err = Run(context.Background(), Options{}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "no scenario")
}

func TestRegisterFlags(t *testing.T) {
	t.Parallel()
	var o Options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"-n", "7", "-workers", "3", "-executors", "2", "-levels", "0,10_000",
		"-duration", "2s", "-json", "-in-process", "-messages", "0", "-keys", "both"}))
	require.Equal(t, "both", o.Keys)
	require.Equal(t, 7, o.N)
	require.Equal(t, 3, o.Workers)
	require.Equal(t, 2, o.Executors)
	require.Equal(t, []int{0, 10000}, o.Levels)
	require.Equal(t, 2*time.Second, o.Duration)
	require.True(t, o.JSON)
	require.True(t, o.InProcess)
	require.Negative(t, o.Messages, "-messages 0: none")
	require.Negative(t, o.withDefaults("bloat").Messages, "-messages 0 is not the default")
	d := Options{}.withDefaults("oneshot")
	require.Equal(t, 50_000, d.N)
	require.Equal(t, 100, d.Workers)
	require.Equal(t, 2, Options{}.withDefaults("bloat").Messages)
	require.Equal(t, []int{0, 50_000}, Options{}.withDefaults("send").Levels)
	require.Equal(t, []int{100, 50_000}, Options{}.withDefaults("inboxpoll").Levels)
	require.Equal(t, 200, Options{}.withDefaults("send").N)
	require.Equal(t, 2_000, Options{}.withDefaults("sendkey").N)
	require.Equal(t, "off", Options{}.withDefaults("create").Keys)
	require.NoError(t, fs.Parse([]string{"-messages", "3"}))
	require.Equal(t, 3, o.Messages)
	require.Error(t, fs.Parse([]string{"-messages", "-1"}))
	for _, s := range Scenarios() {
		require.Contains(t, Usage, s)
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	require.Equal(t, "postgres://u:p@h:5432/x?sslmode=disable", withDatabase("postgres://u:p@h:5432/postgres?sslmode=disable", "x"))
	require.Equal(t, "postgresql://h/x", withDatabase("postgresql://h", "x"))
	require.Equal(t, "host=/tmp user=postgres dbname=x", withDatabase("host=/tmp user=postgres", "x"))
}

func TestFieldsJSONKeepsOrder(t *testing.T) {
	t.Parallel()
	var f Fields
	f.set("b", 1)
	f.set("a", 2.123456)
	f.set("b", 3)
	b, err := json.Marshal(f)
	require.NoError(t, err)
	require.Equal(t, `{"b":3,"a":2.123}`, string(b))
	require.True(t, strings.HasPrefix(format("x_bytes", 2048.0), "2.0 kB"))
	require.Equal(t, "12,345", format("n", 12345))
}

// benchRunner is a runner on a fresh test database.
func benchRunner(b *testing.B, scenario string, o Options) *runner {
	o.Scenario = scenario
	return newRunner(testdb.URL(b), "", o.withDefaults(scenario), io.Discard)
}

// BenchmarkCreateMany creates b.N tasks with CreateMany, 1,000 per call.
func BenchmarkCreateMany(b *testing.B) {
	r := benchRunner(b, "create", Options{N: b.N})
	res := &Result{}
	b.ResetTimer()
	require.NoError(b, runCreate(context.Background(), r, res))
	b.ReportMetric(res.Metrics.Float("tasks_per_sec"), "tasks/s")
}

// BenchmarkOneshot polls b.N tasks once each to Done, with one executor of
// 100 workers in this process.
func BenchmarkOneshot(b *testing.B) {
	r := benchRunner(b, "oneshot", Options{N: max(b.N, 100)})
	res := &Result{}
	b.ResetTimer()
	require.NoError(b, runOneshot(context.Background(), r, res))
	b.ReportMetric(res.Metrics.Float("tasks_per_sec"), "tasks/s")
}

// BenchmarkPingPong sends b.N messages, one at a time, to a suspended task.
func BenchmarkPingPong(b *testing.B) {
	r := benchRunner(b, "pingpong", Options{N: b.N, Gap: time.Millisecond})
	res := &Result{}
	b.ResetTimer()
	require.NoError(b, runPingPong(context.Background(), r, res))
	b.ReportMetric(res.Metrics.Float("p50_ms"), "p50-ms")
	b.ReportMetric(res.Metrics.Float("p99_ms"), "p99-ms")
}

// BenchmarkFanin has one parent collect the results of b.N children.
func BenchmarkFanin(b *testing.B) {
	r := benchRunner(b, "fanin", Options{K: max(b.N, 10)})
	res := &Result{}
	b.ResetTimer()
	require.NoError(b, runFanin(context.Background(), r, res))
	b.ReportMetric(res.Metrics.Float("total_ms"), "ms/fanin")
	b.ReportMetric(res.Metrics.Float("children_per_sec"), "children/s")
}
