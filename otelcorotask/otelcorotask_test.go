package otelcorotask_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	_ "github.com/corotask/corotask/internal/testexit" // no race detector pause at exit
	"github.com/corotask/corotask/otelcorotask"
	"github.com/corotask/corotask/tasks"
)

// TestMain runs more tests at once than there are CPUs: they spend their time
// waiting for the database.
func TestMain(m *testing.M) {
	os.Exit(testdb.Main(m, 8))
}

// telemetry is an in-memory metric reader and span recorder, and Hooks
// recording into them.
type telemetry struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	hooks  *otelcorotask.Hooks
}

func newTelemetry(t *testing.T, cfg otelcorotask.Config) *telemetry {
	t.Helper()
	tel := &telemetry{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans))
	cfg.TracerProvider = tel.tp
	cfg.Logger = quiet()
	h, err := otelcorotask.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Close()) })
	tel.hooks = h
	return tel
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// metrics collects every metric, by name.
func (tel *telemetry) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// key prints an attribute set as "k=v,k=v", sorted.
func key(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
	}
	return strings.Join(parts, ",")
}

// sums returns a counter's values by attributes.
func sums(t *testing.T, data metricdata.Aggregation) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	if data == nil {
		return out // nothing recorded yet
	}
	s, ok := data.(metricdata.Sum[int64])
	require.True(t, ok, "a counter: %T", data)
	for _, dp := range s.DataPoints {
		out[key(dp.Attributes)] = dp.Value
	}
	return out
}

// counts returns how many values a histogram recorded, and their sum, by
// attributes.
func counts[N int64 | float64](t *testing.T, data metricdata.Aggregation) (map[string]uint64, map[string]N) {
	t.Helper()
	n, sum := map[string]uint64{}, map[string]N{}
	if data == nil {
		return n, sum // nothing recorded yet
	}
	h, ok := data.(metricdata.Histogram[N])
	require.True(t, ok, "a histogram: %T", data)
	for _, dp := range h.DataPoints {
		n[key(dp.Attributes)], sum[key(dp.Attributes)] = dp.Count, dp.Sum
	}
	return n, sum
}

func gauge[N int64 | float64](t *testing.T, data metricdata.Aggregation) map[string]N {
	t.Helper()
	g, ok := data.(metricdata.Gauge[N])
	require.True(t, ok, "a gauge: %T", data)
	out := map[string]N{}
	for _, dp := range g.DataPoints {
		out[key(dp.Attributes)] = dp.Value
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// config is the tests' executor configuration: quick to find work, with
// claims that last an hour, so that a stall of a loaded machine never makes
// one expire behind a test's back.
func config() executor.Config {
	return executor.Config{Concurrency: 8, PollInterval: 50 * time.Millisecond, ShutdownTimeout: 5 * time.Second,
		HeartbeatTimeout: testdb.LongHeartbeat, HeartbeatInterval: 10 * time.Second, Logger: quiet()}
}

// A workload of committed polls (spawning children, sending a message),
// failures (one ending its task) and a panic, polled with PollOnce: every
// poll metric and span says what happened.
func TestPollMetricsAndSpans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	tel := newTelemetry(t, otelcorotask.Config{DB: db, ReadyInterval: time.Hour})
	cfg := config()
	cfg.Hooks = tel.hooks
	// A failed task waits an hour: however slowly the test runs, it is not
	// ready again before the test says so.
	cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
	e := executor.MustNew(db, cfg)

	sink, err := tasks.Create(ctx, db, tasks.Spec{Type: "sink", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	// Ready tasks of a type no executor polls: the lag the gauges show.
	for range 3 {
		_, err := tasks.Create(ctx, db, tasks.Spec{Type: "orphan", WakeAt: time.Now().Add(-time.Hour)})
		require.NoError(t, err)
	}
	executor.Register(e, "parent", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if !trace.SpanFromContext(ctx).SpanContext().IsValid() {
			return executor.Action{}, errors.New("the poll's context has no span")
		}
		t.Spawn("kid", nil, nil)
		t.Spawn("kid", nil, nil)
		t.Send(sink, "hello")
		return executor.Suspend(), nil
	}))
	executor.Register(e, "kid", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.DoneWith(1), nil
	}))
	executor.Register(e, "fails", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Action{}, errors.New("on purpose")
	}), executor.MaxFailures(2))
	executor.Register(e, "panics", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		panic("boom")
	}))
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	fails, err := tasks.Create(ctx, db, tasks.Spec{Type: "fails"})
	require.NoError(t, err)
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "panics"})
	require.NoError(t, err)

	// A span in the caller's context does not become the polls' parent.
	callerCtx, caller := tel.tp.Tracer("test").Start(ctx, "caller")
	n, err := e.PollOnce(callerCtx)
	require.Equal(t, 3, n)
	require.Error(t, err)
	caller.End()
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET wake_at = now() WHERE task_id = $1`, fails)
	require.NoError(t, err)
	n, err = e.PollOnce(ctx) // the kids, and the second failure, which ends its task
	require.Equal(t, 3, n)
	require.Error(t, err)

	m := tel.metrics(t)
	require.Equal(t, map[string]int64{
		"outcome=committed,task.type=parent": 1,
		"outcome=committed,task.type=kid":    2,
		"outcome=failed,task.type=fails":     2,
		"outcome=panicked,task.type=panics":  1,
	}, sums(t, m["corotask.polls"]))
	n2, _ := counts[float64](t, m["corotask.poll.duration"])
	require.Equal(t, map[string]uint64{
		"outcome=committed,task.type=parent": 1,
		"outcome=committed,task.type=kid":    2,
		"outcome=failed,task.type=fails":     2,
		"outcome=panicked,task.type=panics":  1,
	}, n2)
	require.Equal(t, map[string]int64{
		"task.ended=false,task.type=fails":  1,
		"task.ended=true,task.type=fails":   1,
		"task.ended=false,task.type=panics": 1,
	}, sums(t, m["corotask.poll.failures"]))
	require.Equal(t, map[string]int64{"task.type=panics": 1}, sums(t, m["corotask.poll.panics"]))
	require.Equal(t, map[string]int64{"task.type=parent": 1}, sums(t, m["corotask.messages.sent"]))
	require.Equal(t, map[string]int64{"task.type=parent": 2}, sums(t, m["corotask.tasks.created"]))
	claims, _ := counts[float64](t, m["corotask.claim.duration"])
	require.Equal(t, map[string]uint64{"outcome=ok": 2}, claims)
	_, claimed := counts[int64](t, m["corotask.claim.batch_size"])
	require.Equal(t, map[string]int64{"": 6}, claimed)
	commits, _ := counts[float64](t, m["corotask.commit.duration"])
	require.Equal(t, map[string]uint64{"outcome=ok": 3}, commits, "PollOnce commits the parent and each kid on its own")
	_, committed := counts[int64](t, m["corotask.commit.batch_size"])
	require.Equal(t, map[string]int64{"": 3}, committed)
	require.NotContains(t, m, "corotask.claims.lost")

	// The gauges: the orphans are ready (an hour late), so are the sink
	// (a message) and the parent (its kids' completions); the types polled
	// here with none ready say 0.
	ready := gauge[int64](t, m["corotask.tasks.ready"])
	require.Equal(t, map[string]int64{"task.type=orphan": 3, "task.type=parent": 1, "task.type=sink": 1,
		"task.type=kid": 0, "task.type=fails": 0, "task.type=panics": 0}, ready)
	age := gauge[float64](t, m["corotask.tasks.ready.oldest_age"])
	requireAge(t, time.Hour, age["task.type=orphan"])
	require.Zero(t, age["task.type=kid"])
	// Collections within ReadyInterval do not query again.
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "orphan", WakeAt: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	require.Equal(t, int64(3), gauge[int64](t, tel.metrics(t)["corotask.tasks.ready"])["task.type=orphan"])

	// One span per poll.
	var spans []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if s.Name() != "caller" {
			spans = append(spans, s)
		}
	}
	require.Len(t, spans, 6)
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		require.False(t, s.Parent().IsValid(), "a poll's span is a root")
		byName[s.Name()] = append(byName[s.Name()], s)
		require.Equal(t, trace.SpanKindConsumer, s.SpanKind())
	}
	require.Len(t, byName["corotask.poll kid"], 2)
	p := byName["corotask.poll parent"]
	require.Len(t, p, 1)
	require.Equal(t, map[string]string{
		"corotask.task.id": parent.String(), "corotask.task.type": "parent", "corotask.poll.attempt": "1",
		"corotask.poll.outcome": "committed", "corotask.poll.action": "suspend",
		"corotask.poll.spawned": "2", "corotask.poll.sent": "1",
	}, attrs(p[0]))
	require.Equal(t, codes.Unset, p[0].Status().Code)
	kid := attrs(byName["corotask.poll kid"][0])
	require.Equal(t, parent.String(), kid["corotask.task.parent_id"])
	require.Equal(t, "done", kid["corotask.poll.action"])

	f := byName["corotask.poll fails"]
	require.Len(t, f, 2)
	require.Equal(t, "1", attrs(f[0])["corotask.poll.attempt"])
	require.Equal(t, "2", attrs(f[1])["corotask.poll.attempt"])
	require.Equal(t, "failed", attrs(f[1])["corotask.poll.outcome"])
	require.NotContains(t, attrs(f[1]), "corotask.poll.action")
	require.Equal(t, codes.Error, f[1].Status().Code)
	require.Equal(t, "on purpose", f[1].Status().Description)
	require.Len(t, f[1].Events(), 1)
	require.Equal(t, "exception", f[1].Events()[0].Name)

	pn := byName["corotask.poll panics"]
	require.Len(t, pn, 1)
	require.Equal(t, "panicked", attrs(pn[0])["corotask.poll.outcome"])
	require.Equal(t, codes.Error, pn[0].Status().Code)
	ev := map[string]string{}
	for _, kv := range pn[0].Events()[0].Attributes {
		ev[string(kv.Key)] = kv.Value.Emit()
	}
	require.Contains(t, ev["exception.message"], "boom")
	require.Contains(t, ev["exception.stacktrace"], "otelcorotask_test")
}

// Run: batched commits, heartbeat renewals, and a claim taken over by
// another executor once this one's heartbeat looks stale.
func TestClaimTakenOverAndHeartbeatMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	telA, telB := newTelemetry(t, otelcorotask.Config{}), newTelemetry(t, otelcorotask.Config{})

	cfgA := config()
	// A's claims last an hour, renewed often; its claim on job is expired by
	// hand below, again after each of A's renewals, as if A had stalled,
	// until B, which looks for expired claims every 50ms, takes it over.
	cfgA.HeartbeatTimeout, cfgA.HeartbeatInterval = testdb.LongHeartbeat, 200*time.Millisecond
	cfgA.Hooks = telA.hooks
	a := executor.MustNew(testdb.Pool(t, url), cfgA)
	aEntered := make(chan struct{})
	executor.Register(a, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		close(aEntered)
		<-ctx.Done()
		return executor.DoneWith("A"), nil
	}), executor.MaxConcurrency(1)) // A's one slot for job is held: B takes job over
	executor.Register(a, "quick", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	job, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	stopA := run(t, a)
	<-aEntered
	specs := make([]tasks.Spec, 10)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "quick"}
	}
	_, err = tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var left int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE task_type = 'quick' AND done_at IS NULL`).Scan(&left))
		return left == 0
	}, testdb.Patience, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		n, _ := counts[float64](t, telA.metrics(t)["corotask.heartbeat.duration"])
		return n["outcome=ok"] >= 1
	}, testdb.Patience, 10*time.Millisecond, "a renewal")

	var claimA [16]byte
	require.NoError(t, db.QueryRow(ctx, `SELECT claim FROM corotask.tasks WHERE task_id = $1`, job).Scan(&claimA))
	cfgB := config()
	cfgB.Hooks = telB.hooks
	b := executor.MustNew(testdb.Pool(t, url), cfgB)
	executor.Register(b, "job", executor.PollerFunc[string, int](func(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
		return executor.DoneWith("B"), nil
	}))
	stopB := run(t, b)
	require.Eventually(t, func() bool {
		tag, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim_expires_at = now() - interval '1 second'
			WHERE task_id = $1 AND claim = $2`, job, claimA)
		require.NoError(t, err)
		return tag.RowsAffected() == 0
	}, testdb.Patience, 10*time.Millisecond, "B to take over A's expired claim")
	require.Eventually(t, func() bool {
		return sums(t, telA.metrics(t)["corotask.claims.lost"])["cause=taken_over,task.type=job"] == 1
	}, testdb.Patience, 10*time.Millisecond, "A's claim lost")
	require.Eventually(t, func() bool {
		task, err := tasks.Get(ctx, db, job)
		require.NoError(t, err)
		return task.Status == tasks.StatusDone
	}, testdb.Patience, 10*time.Millisecond, "B's poll committed")
	stopA()
	stopB()

	mA := telA.metrics(t)
	require.Equal(t, map[string]int64{"cause=taken_over,task.type=job": 1}, sums(t, mA["corotask.claims.lost"]))
	require.NotContains(t, mA, "corotask.claims.taken_over", "the executor that lost the claim took nothing over")
	require.Equal(t, map[string]int64{"outcome=claim_lost,task.type=job": 1, "outcome=committed,task.type=quick": 10},
		sums(t, mA["corotask.polls"]))
	_, batched := counts[int64](t, mA["corotask.commit.batch_size"])
	require.Equal(t, int64(10), batched[""], "every quick poll committed")
	mB := telB.metrics(t)
	require.Equal(t, map[string]int64{"outcome=committed,task.type=job": 1}, sums(t, mB["corotask.polls"]))
	require.Equal(t, map[string]int64{"task.type=job": 1}, sums(t, mB["corotask.claims.taken_over"]), "counted by the executor that took the task over")
	require.NotContains(t, mA, "corotask.tasks.ready", "no gauges without Config.DB")

	var lost sdktrace.ReadOnlySpan
	for _, s := range telA.spans.Ended() {
		if s.Name() == "corotask.poll job" {
			lost = s
		}
	}
	require.NotNil(t, lost)
	require.Equal(t, job.String(), attrs(lost)["corotask.task.id"])
	require.Equal(t, "claim_lost", attrs(lost)["corotask.poll.outcome"])
	require.Equal(t, codes.Error, lost.Status().Code)
}

// run runs e until the returned function is called (or the test ends).
func run(t *testing.T, e *executor.Executor) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(testdb.Patience):
			t.Error("executor did not stop")
		}
	}
	t.Cleanup(stop)
	return stop
}

// Children an executor creates claimed are counted, and so are the claims
// they save: the parent's two polls are the only tasks claimed.
func TestEagerChildrenMetric(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	tel := newTelemetry(t, otelcorotask.Config{})
	cfg := config()
	cfg.Hooks = tel.hooks
	e := executor.MustNew(db, cfg)
	executor.Register(e, "parent", executor.PollerFunc[bool, int](func(ctx context.Context, t *executor.Task[bool, int]) (executor.Action, error) {
		if t.State {
			return executor.Done(), nil
		}
		t.State = true
		t.Spawn("kid", nil, nil)
		t.Spawn("kid", nil, nil)
		return executor.AwaitChildren(), nil
	}))
	executor.Register(e, "kid", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.DoneWith(1), nil
	}))
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	stop := run(t, e)
	require.Eventually(t, func() bool {
		p, err := tasks.Get(ctx, db, parent)
		require.NoError(t, err)
		return p.Status == tasks.StatusDone
	}, testdb.Patience, 10*time.Millisecond)
	stop()

	m := tel.metrics(t)
	require.Equal(t, map[string]int64{"": 2}, sums(t, m["corotask.tasks.eager"]))
	_, claimed := counts[int64](t, m["corotask.claim.batch_size"])
	require.Equal(t, map[string]int64{"": 2}, claimed)
	require.Equal(t, map[string]int64{"outcome=committed,task.type=kid": 2, "outcome=committed,task.type=parent": 2},
		sums(t, m["corotask.polls"]))
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	_, err := otelcorotask.New(otelcorotask.Config{ReadyInterval: -time.Second})
	require.ErrorContains(t, err, "ReadyInterval")
	_, err = otelcorotask.New(otelcorotask.Config{ReadyLimit: -1})
	require.ErrorContains(t, err, "ReadyLimit")
}

// With more ready tasks than ReadyLimit, the gauges report what the oldest
// ReadyLimit say, and leave out the types not among them rather than say 0.
func TestReadyGaugesAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	tel := newTelemetry(t, otelcorotask.Config{DB: db, ReadyLimit: 2})
	cfg := config()
	cfg.Hooks = tel.hooks
	e := executor.MustNew(db, cfg)
	executor.Register(e, "idle", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	n, err := e.PollOnce(ctx) // the executor's types are now known
	require.NoError(t, err)
	require.Zero(t, n)
	m := tel.metrics(t)
	require.Equal(t, map[string]int64{"task.type=idle": 0}, gauge[int64](t, m["corotask.tasks.ready"]))

	h2 := newTelemetry(t, otelcorotask.Config{DB: db, ReadyLimit: 2})
	cfg.Hooks = h2.hooks
	e = executor.MustNew(db, cfg)
	executor.Register(e, "idle", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	for i := range 3 {
		_, err := tasks.Create(ctx, db, tasks.Spec{Type: "orphan", WakeAt: time.Now().Add(-time.Duration(i+1) * time.Hour)})
		require.NoError(t, err)
	}
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "idle", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.NoError(t, err)
	m = h2.metrics(t)
	require.Equal(t, map[string]int64{"task.type=orphan": 2}, gauge[int64](t, m["corotask.tasks.ready"]))
	requireAge(t, 3*time.Hour, gauge[float64](t, m["corotask.tasks.ready.oldest_age"])["task.type=orphan"])
}

// requireAge checks an age in seconds, read at least want after its start:
// at least want (a second less, for rounding), and not more than the
// longest a test waits on top.
func requireAge(t *testing.T, want time.Duration, got float64) {
	t.Helper()
	require.GreaterOrEqual(t, got, (want - time.Second).Seconds())
	require.Less(t, got, (want + testdb.Patience).Seconds())
}
