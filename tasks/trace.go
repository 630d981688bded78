package tasks

import "context"

// traceKey is the context key of the trace context WithTrace attaches.
type traceKey struct{}

// WithTrace returns a context carrying carrier, a W3C trace context (the
// keys "traceparent" and, optionally, "tracestate"), for Create, CreateMany
// and inbox.Send to store with what they create or send: the spans of the
// polls that later work on it link to that trace. An empty carrier leaves ctx
// as it is.
//
// This package does not depend on OpenTelemetry: package otelcorotask fills
// the carrier from a span (otelcorotask.WithTrace), and the executor passes
// a poll's own trace context on to what the poll spawns and sends.
func WithTrace(ctx context.Context, carrier map[string]string) context.Context {
	if len(carrier) == 0 {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, carrier)
}

// TraceFrom returns the trace context WithTrace attached to ctx, or nil. The
// map is the caller's to read, not to change.
func TraceFrom(ctx context.Context) map[string]string {
	c, _ := ctx.Value(traceKey{}).(map[string]string)
	return c
}
