package otelcorotask_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/otelcorotask"
	"github.com/corotask/corotask/tasks"
)

// spanID names a span by its trace and span IDs.
type spanID struct {
	trace trace.TraceID
	span  trace.SpanID
}

func idOf(sc trace.SpanContext) spanID { return spanID{sc.TraceID(), sc.SpanID()} }

// links returns the spans s links to.
func links(s sdktrace.ReadOnlySpan) []spanID {
	var out []spanID
	for _, l := range s.Links() {
		out = append(out, idOf(l.SpanContext))
	}
	return out
}

// pollSpans returns the ended poll spans of task id, in the order they ended.
func (tel *telemetry) pollSpans(id tasks.ID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if attrs(s)["corotask.task.id"] == id.String() {
			out = append(out, s)
		}
	}
	return out
}

// The polls of a task created in a traced context link to the creator's
// span, every one of them: the poll is not the creator's child (its trace
// is its own).
func TestPollSpansLinkToTheTaskCreator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	tel := newTelemetry(t, otelcorotask.Config{})
	cfg := config()
	cfg.Hooks = tel.hooks
	e := executor.MustNew(db, cfg)
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		t.State++
		if t.State == 1 {
			return executor.Yield(), nil
		}
		return executor.Done(), nil
	}))

	sctx, creator := tel.tp.Tracer("test").Start(ctx, "create order")
	id, err := tasks.Create(otelcorotask.WithTrace(sctx), db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	creator.End()
	for range 2 {
		n, err := e.PollOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}

	polls := tel.pollSpans(id)
	require.Len(t, polls, 2)
	for _, p := range polls {
		require.Equal(t, []spanID{idOf(creator.SpanContext())}, links(p))
		require.NotEqual(t, creator.SpanContext().TraceID(), p.SpanContext().TraceID())
		require.False(t, p.Parent().IsValid(), "a poll span is a root")
	}
}

// The poll that finds messages sent in traced contexts links to each
// sender's span; a message sent outside a trace adds no link.
func TestPollSpanLinksToMessageSenders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	tel := newTelemetry(t, otelcorotask.Config{})
	cfg := config()
	cfg.Hooks = tel.hooks
	e := executor.MustNew(db, cfg)
	executor.Register(e, "inbox", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		for {
			if _, ok := t.Inbox.Pop(); !ok {
				return executor.Suspend(), nil
			}
		}
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "inbox", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)

	tracer := tel.tp.Tracer("test")
	ctx1, first := tracer.Start(ctx, "approve")
	require.NoError(t, inbox.Send(otelcorotask.WithTrace(ctx1), db, id, tasks.ID{}, "approve"))
	first.End()
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "untraced"))
	ctx2, second := tracer.Start(ctx, "ship")
	require.NoError(t, inbox.Send(otelcorotask.WithTrace(ctx2), db, id, tasks.ID{}, "ship"))
	second.End()
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	polls := tel.pollSpans(id)
	require.Len(t, polls, 1)
	require.Equal(t, []spanID{idOf(first.SpanContext()), idOf(second.SpanContext())}, links(polls[0]))
}

// What a poll spawns and sends links back to it: the child's polls and the
// recipient's poll link to the span of the poll that made them.
func TestSpawnsAndSendsLinkToTheirPoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	tel := newTelemetry(t, otelcorotask.Config{})
	cfg := config()
	cfg.Hooks = tel.hooks
	e := executor.MustNew(db, cfg)
	recipient, err := tasks.Create(ctx, db, tasks.Spec{Type: "recipient", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	var child tasks.ID
	executor.Register(e, "parent", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if t.State == 0 {
			t.State = 1
			child = t.Spawn("child", nil, nil)
			t.Send(recipient, 1)
		}
		return executor.Suspend(), nil
	}))
	done := executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	})
	executor.Register(e, "child", done)
	executor.Register(e, "recipient", done)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = e.PollOnce(ctx) // the child and the recipient
	require.NoError(t, err)
	require.Equal(t, 2, n)

	parentPolls := tel.pollSpans(parent)
	require.Len(t, parentPolls, 1)
	require.Empty(t, parentPolls[0].Links(), "a task created outside a trace links to nothing")
	want := []spanID{idOf(parentPolls[0].SpanContext())}
	for _, id := range []tasks.ID{child, recipient} {
		polls := tel.pollSpans(id)
		require.Len(t, polls, 1)
		require.Equal(t, want, links(polls[0]), "task %s", id)
	}
}

// Without a span in its context, otelcorotask.WithTrace adds nothing, and
// nothing is stored.
func TestWithTraceWithoutSpan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	require.Nil(t, tasks.TraceFrom(otelcorotask.WithTrace(ctx)))
	// A span that is not sampled has a valid context: it is still linked to.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	sctx, span := tp.Tracer("test").Start(ctx, "unsampled")
	defer span.End()
	carrier := tasks.TraceFrom(otelcorotask.WithTrace(sctx))
	require.Contains(t, carrier, "traceparent")
	require.Contains(t, carrier["traceparent"], span.SpanContext().TraceID().String())
}

// A poll whose span is not sampled passes no trace context on: its span is
// not exported, and a link to it would lead nowhere.
func TestUnsampledPollsPassNoTraceOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	hooks, err := otelcorotask.New(otelcorotask.Config{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())),
		Logger:         quiet(),
	})
	require.NoError(t, err)
	cfg := config()
	cfg.Hooks = hooks
	e := executor.MustNew(db, cfg)
	executor.Register(e, "parent", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		t.Spawn("child", nil, nil)
		return executor.Suspend(), nil
	}))
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var traced, all int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(trace), count(*) FROM corotask.tasks`).Scan(&traced, &all))
	require.Equal(t, 2, all)
	require.Zero(t, traced)
}

// The poll span of a task with a key carries it, whether the task was
// claimed or created claimed by its parent's executor (eager); a task
// without one has no key attribute.
func TestPollSpanCarriesTheTaskKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	tel := newTelemetry(t, otelcorotask.Config{})
	cfg := config()
	cfg.Hooks = tel.hooks
	e := executor.MustNew(db, cfg)
	executor.Register(e, "order", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	executor.Register(e, "batch", executor.PollerFunc[bool, int](func(ctx context.Context, t *executor.Task[bool, int]) (executor.Action, error) {
		if t.State {
			return executor.Done(), nil
		}
		t.State = true
		t.SpawnKeyed("order", "order-7", nil, nil)
		return executor.AwaitChildren(), nil
	}))

	keyed, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order 42"})
	require.NoError(t, err)
	plain, err := tasks.Create(ctx, db, tasks.Spec{Type: "order"})
	require.NoError(t, err)
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Len(t, tel.pollSpans(keyed), 1)
	require.Equal(t, "order 42", attrs(tel.pollSpans(keyed)[0])["corotask.task.key"])
	require.Len(t, tel.pollSpans(plain), 1)
	require.NotContains(t, attrs(tel.pollSpans(plain)[0]), "corotask.task.key")

	batch, err := tasks.Create(ctx, db, tasks.Spec{Type: "batch"})
	require.NoError(t, err)
	stop := run(t, e)
	require.Eventually(t, func() bool {
		b, err := tasks.Get(ctx, db, batch)
		require.NoError(t, err)
		return b.Status == tasks.StatusDone
	}, testdb.Patience, 10*time.Millisecond)
	stop()
	kids, err := tasks.List(ctx, db, tasks.Filter{Parent: batch})
	require.NoError(t, err)
	require.Len(t, kids, 1)
	spans := tel.pollSpans(kids[0].ID)
	require.Len(t, spans, 1)
	require.Equal(t, "order-7", attrs(spans[0])["corotask.task.key"])
	require.Equal(t, batch.String(), attrs(spans[0])["corotask.task.parent_id"])
}
