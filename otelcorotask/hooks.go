package otelcorotask

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

// scope is the instrumentation scope of the meter and tracer.
const scope = "github.com/corotask/corotask/otelcorotask"

// Config configures Hooks. Zero fields take the defaults documented on each.
type Config struct {
	// MeterProvider makes the metrics. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider makes the poll spans. Default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// DB is where the ready-tasks gauges (corotask.tasks.ready and
	// corotask.tasks.ready.oldest_age) are computed. Default none: no gauges.
	DB tasks.DB
	// ReadyInterval is how old the ready-tasks gauges may get: a collection
	// computes them again (one query) when they are older. Default 15s; must
	// not be negative.
	ReadyInterval time.Duration
	// ReadyLimit is how many ready tasks, the oldest, the gauges' query reads
	// at most, which bounds its cost: with more ready tasks than that,
	// corotask.tasks.ready adds up to ReadyLimit over all types. Default
	// 100,000; must not be negative.
	ReadyLimit int
	// Logger receives the errors of the gauges' query. Default
	// slog.Default().
	Logger *slog.Logger
}

// Hooks records executor events as OpenTelemetry metrics and spans. Make one
// with New, and set it as executor.Config.Hooks. Its methods are safe for
// concurrent use.
type Hooks struct {
	executor.NoHooks

	tracer trace.Tracer
	ready  *readyGauges
	reg    metric.Registration

	polls, pollFailures, pollPanics, claimsLost, takenOver, sent, created, eager metric.Int64Counter
	pollDur, claimDur, commitDur, heartbeatDur                                   metric.Float64Histogram
	claimBatch, commitBatch                                                      metric.Int64Histogram

	// Attribute sets and span names, made once per type and outcome.
	mu    sync.RWMutex
	attrs map[attrKey]metric.MeasurementOption
	names map[tasks.Type]string
}

type attrKey struct {
	typ   tasks.Type
	name  string // the second attribute's key, or ""
	value string
}

var (
	newRoot  = trace.WithNewRoot()
	consumer = trace.WithSpanKind(trace.SpanKindConsumer)

	durationBounds = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
	batchBounds    = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}
)

// New returns Hooks that record on cfg's providers. It fails if an
// instrument cannot be made, or cfg is outside its limits.
func New(cfg Config) (*Hooks, error) {
	if cfg.ReadyInterval < 0 || cfg.ReadyLimit < 0 {
		return nil, fmt.Errorf("otelcorotask: Config.ReadyInterval (%s) and ReadyLimit (%d) must not be negative", cfg.ReadyInterval, cfg.ReadyLimit)
	}
	mp := cmp.Or[metric.MeterProvider](cfg.MeterProvider, otel.GetMeterProvider())
	tp := cmp.Or[trace.TracerProvider](cfg.TracerProvider, otel.GetTracerProvider())
	m := mp.Meter(scope)
	h := &Hooks{
		tracer: tp.Tracer(scope),
		attrs:  map[attrKey]metric.MeasurementOption{},
		names:  map[tasks.Type]string{},
	}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		c, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBounds...))
		errs = append(errs, err)
		return c
	}
	sizes := func(name, unit, desc string) metric.Int64Histogram {
		c, err := m.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(batchBounds...))
		errs = append(errs, err)
		return c
	}
	h.polls = counter("corotask.polls", "{poll}", "Polls settled, by outcome.")
	h.pollFailures = counter("corotask.poll.failures", "{poll}", "Polls that failed or panicked, recorded as failures.")
	h.pollPanics = counter("corotask.poll.panics", "{poll}", "Polls that panicked.")
	h.claimsLost = counter("corotask.claims.lost", "{claim}", "Polls whose claim the executor lost.")
	h.takenOver = counter("corotask.claims.taken_over", "{claim}", "Claims lost to another executor that took the task over.")
	h.sent = counter("corotask.messages.sent", "{message}", "Messages sent by committed polls.")
	h.created = counter("corotask.tasks.created", "{task}", "Child tasks spawned by committed polls.")
	h.eager = counter("corotask.tasks.eager", "{task}", "Children created claimed by the executor whose commit spawned them, polled without a claim.")
	h.pollDur = seconds("corotask.poll.duration", "Time a poll ran, not counting its commit.")
	h.claimDur = seconds("corotask.claim.duration", "Duration of one claim statement.")
	h.commitDur = seconds("corotask.commit.duration", "Duration of one commit statement.")
	h.heartbeatDur = seconds("corotask.heartbeat.duration", "Duration of one renewal of the claims in flight.")
	h.claimBatch = sizes("corotask.claim.batch_size", "{task}", "Tasks one claim took.")
	h.commitBatch = sizes("corotask.commit.batch_size", "{poll}", "Polls one commit statement carried.")
	if cfg.DB != nil {
		g, reg, err := newReadyGauges(m, cfg)
		h.ready, h.reg = g, reg
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelcorotask: %w", err)
	}
	return h, nil
}

// Close stops the ready-tasks gauges' callback. The other metrics, and the
// spans, are the providers' to flush.
func (h *Hooks) Close() error {
	if h.reg == nil {
		return nil
	}
	return h.reg.Unregister()
}

// attr returns the measurement option of the attributes task.type=typ and
// name=value (none if name is empty), made once.
func (h *Hooks) attr(typ tasks.Type, name, value string) metric.MeasurementOption {
	k := attrKey{typ, name, value}
	h.mu.RLock()
	o, ok := h.attrs[k]
	h.mu.RUnlock()
	if ok {
		return o
	}
	var kvs []attribute.KeyValue
	if typ != "" {
		kvs = append(kvs, attribute.String("task.type", string(typ)))
	}
	if name != "" {
		kvs = append(kvs, attribute.String(name, value))
	}
	o = metric.WithAttributeSet(attribute.NewSet(kvs...))
	h.mu.Lock()
	h.attrs[k] = o
	h.mu.Unlock()
	return o
}

// spanName returns "corotask.poll <typ>", made once per type.
func (h *Hooks) spanName(typ tasks.Type) string {
	h.mu.RLock()
	n, ok := h.names[typ]
	h.mu.RUnlock()
	if ok {
		return n
	}
	n = "corotask.poll " + string(typ)
	h.mu.Lock()
	h.names[typ] = n
	h.mu.Unlock()
	return n
}

func outcomeOf(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// ClaimDone records the claim's duration and batch size, and the types the
// executor works on for the ready-tasks gauges.
func (h *Hooks) ClaimDone(ctx context.Context, info *executor.ClaimInfo) {
	h.claimDur.Record(ctx, info.Duration.Seconds(), h.attr("", "outcome", outcomeOf(info.Err)))
	if info.Err == nil {
		h.claimBatch.Record(ctx, int64(info.Claimed))
	}
	if h.ready != nil {
		h.ready.know(info.Types)
	}
}

// PollStart starts the poll's span, linked to the trace contexts of the
// task's creation and of its messages. Its attributes are set when it ends,
// all at once, which costs the SDK one allocation rather than two. The
// context it returns carries the span's trace context for tasks.WithTrace
// (when the span is sampled), so that what the poll spawns and sends links
// back to it.
func (h *Hooks) PollStart(ctx context.Context, info *executor.PollInfo) context.Context {
	if info.TakenOver {
		h.takenOver.Add(ctx, 1, h.attr(info.Type, "", ""))
	}
	var span trace.Span
	if info.Trace == nil && len(info.MessageTraces) == 0 {
		ctx, span = h.tracer.Start(ctx, h.spanName(info.Type), newRoot, consumer)
	} else {
		links := make([]trace.Link, 0, 1+len(info.MessageTraces))
		links = appendLink(links, info.Trace)
		for _, c := range info.MessageTraces {
			links = appendLink(links, c)
		}
		ctx, span = h.tracer.Start(ctx, h.spanName(info.Type), newRoot, consumer, trace.WithLinks(links...))
	}
	// A span that is not sampled is not exported: a link to it would lead
	// nowhere, and leaving it out saves the work of encoding it.
	if sc := span.SpanContext(); sc.IsSampled() {
		return withSpanTrace(ctx, sc)
	}
	return ctx
}

// propagator reads and writes the trace contexts corotask stores: W3C's.
var propagator = propagation.TraceContext{}

// appendLink appends a link to the span of carrier, if it holds a valid one.
func appendLink(links []trace.Link, carrier map[string]string) []trace.Link {
	if carrier == nil {
		return links
	}
	sc := trace.SpanContextFromContext(propagator.Extract(context.Background(), propagation.MapCarrier(carrier)))
	if !sc.IsValid() {
		return links
	}
	return append(links, trace.Link{SpanContext: sc})
}

// withSpanTrace returns ctx carrying sc as a W3C trace context for
// tasks.WithTrace; ctx itself if sc is not valid (no tracing).
func withSpanTrace(ctx context.Context, sc trace.SpanContext) context.Context {
	if !sc.IsValid() {
		return ctx
	}
	carrier := propagation.MapCarrier{}
	propagator.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	return tasks.WithTrace(ctx, carrier)
}

// WithTrace returns ctx carrying the trace context of its current span for
// tasks.Create, tasks.CreateMany and inbox.Send to store: the spans of the
// polls of the tasks they create, or that receive the messages they send,
// link to that span. It returns ctx itself when ctx has no valid span.
//
//	id, err := tasks.Create(otelcorotask.WithTrace(ctx), db, spec)
//
// Polls need no such call: the executor passes the context of a poll's span
// on to what the poll spawns and sends.
func WithTrace(ctx context.Context) context.Context {
	return withSpanTrace(ctx, trace.SpanContextFromContext(ctx))
}

// PollDone records the poll's metrics and ends its span.
func (h *Hooks) PollDone(ctx context.Context, info *executor.PollInfo, res *executor.PollResult) {
	typ := info.Type
	h.polls.Add(ctx, 1, h.attr(typ, "outcome", string(res.Outcome)))
	h.pollDur.Record(ctx, res.Duration.Seconds(), h.attr(typ, "outcome", string(res.Outcome)))
	switch res.Outcome {
	case executor.OutcomeCommitted:
		if res.Sent > 0 {
			h.sent.Add(ctx, int64(res.Sent), h.attr(typ, "", ""))
		}
		if res.Spawned > 0 {
			h.created.Add(ctx, int64(res.Spawned), h.attr(typ, "", ""))
		}
	case executor.OutcomePanicked:
		h.pollPanics.Add(ctx, 1, h.attr(typ, "", ""))
		fallthrough
	case executor.OutcomeFailed:
		h.pollFailures.Add(ctx, 1, h.attr(typ, "task.ended", strconv.FormatBool(res.Ended)))
	case executor.OutcomeClaimLost:
		cause := "fenced"
		switch {
		case errors.Is(res.Err, executor.ErrClaimLost):
			cause = "taken_over"
		case errors.Is(res.Err, executor.ErrRenewTimeout):
			cause = "expired"
		}
		h.claimsLost.Add(ctx, 1, h.attr(typ, "cause", cause))
	}

	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		span.End()
		return
	}
	attrs := make([]attribute.KeyValue, 4, 9)
	attrs[0] = attribute.String("corotask.task.id", info.Task.String())
	attrs[1] = attribute.String("corotask.task.type", string(info.Type))
	attrs[2] = attribute.Int("corotask.poll.attempt", info.Attempt)
	attrs[3] = attribute.String("corotask.poll.outcome", string(res.Outcome))
	if !info.Parent.IsZero() {
		attrs = append(attrs, attribute.String("corotask.task.parent_id", info.Parent.String()))
	}
	if info.Key != "" {
		attrs = append(attrs, attribute.String("corotask.task.key", info.Key))
	}
	if res.Action != "" {
		attrs = append(attrs, attribute.String("corotask.poll.action", res.Action))
	}
	if res.Outcome == executor.OutcomeCommitted {
		attrs = append(attrs, attribute.Int("corotask.poll.spawned", res.Spawned), attribute.Int("corotask.poll.sent", res.Sent))
	}
	span.SetAttributes(attrs...)
	if res.Outcome != executor.OutcomeCommitted && res.Err != nil {
		var opts []trace.EventOption
		var p *executor.PanicError
		if errors.As(res.Err, &p) {
			opts = append(opts, trace.WithAttributes(attribute.String("exception.stacktrace", string(p.Stack))))
		}
		span.RecordError(res.Err, opts...)
		span.SetStatus(codes.Error, res.Err.Error())
	}
	span.End()
}

// CommitDone records the commit's duration and batch size, and the children
// it created claimed.
func (h *Hooks) CommitDone(ctx context.Context, info *executor.CommitInfo) {
	h.commitDur.Record(ctx, info.Duration.Seconds(), h.attr("", "outcome", outcomeOf(info.Err)))
	h.commitBatch.Record(ctx, int64(info.Polls))
	if info.Children > 0 {
		h.eager.Add(ctx, int64(info.Children))
	}
}

// HeartbeatDone records the renewal's duration.
func (h *Hooks) HeartbeatDone(ctx context.Context, info *executor.HeartbeatInfo) {
	h.heartbeatDur.Record(ctx, info.Duration.Seconds(), h.attr("", "outcome", outcomeOf(info.Err)))
}
