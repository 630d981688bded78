package bench

import (
	"context"
	"sync"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/otelcorotask"
)

// otelHooks returns the hooks that Options.OTel turns on: otelcorotask on
// the OpenTelemetry SDK, sampling every span and aggregating every metric in
// memory, but exporting nothing, so that what is measured is the cost of the
// instrumentation itself. The ready-tasks gauges, computed only when
// collected, are left out. One set serves every executor of the process.
var otelHooks = sync.OnceValues(func() (executor.Hooks, error) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(discardSpans{}))
	return otelcorotask.New(otelcorotask.Config{MeterProvider: mp, TracerProvider: tp})
})

// discardSpans is a span processor that drops every ended span.
type discardSpans struct{}

func (discardSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardSpans) Shutdown(context.Context) error                  { return nil }
func (discardSpans) ForceFlush(context.Context) error                { return nil }
