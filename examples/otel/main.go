// Command otel runs a small workflow with OpenTelemetry metrics and traces,
// exported to standard output as JSON: how an application wires
// otelcorotask.
//
// A checkout task (type otel.checkout) spawns one otel.item task per item
// and fans in their results. The first item fails its first poll (a
// transient error), and is polled again after a short backoff: the failure
// shows in the metrics and in the spans. The checkout is created in the
// span of a "checkout request", which the checkout's poll spans link to; the
// items' poll spans link to the poll that spawned them.
//
//	go run ./examples/otel
//	go run ./examples/otel -items 10 -pretty
//
// prints every poll's span as it ends ("corotask.poll otel.item", ...),
// then, when the workflow is done, every metric (corotask.polls,
// corotask.poll.duration, corotask.tasks.ready, ...), then the outcome:
//
//	checkout 01M80BSHSJ9G6PP1MVDMRXYY5K done: 3 items, total 6
//
// Flags:
//
//	-items N          items in the checkout (default 3)
//	-pretty           indent the JSON
//	--database-url U  the PostgreSQL URL (default $DATABASE_URL, else libpq's
//	                  PG* variables, else database corotask on 127.0.0.1:5432,
//	                  created when missing)
//	-v                debug logs
//
// To export to a collector instead, replace the stdout exporters with
// go.opentelemetry.io/otel/exporters/otlp/... (or a Prometheus exporter as
// the metric reader); the corotask part does not change.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/otelcorotask"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

const (
	checkoutType tasks.Type = "otel.checkout"
	itemType     tasks.Type = "otel.item"
)

type config struct {
	DatabaseURL string
	Items       int
	Pretty      bool
	Logger      *slog.Logger
}

func main() {
	var cfg config
	var verbose bool
	flag.StringVar(&cfg.DatabaseURL, "database-url", "", "the PostgreSQL `URL` (default: $DATABASE_URL, else libpq's PG* variables, else database corotask on 127.0.0.1:5432, created when missing)")
	flag.IntVar(&cfg.Items, "items", 3, "items in the checkout")
	flag.BoolVar(&cfg.Pretty, "pretty", false, "indent the JSON")
	flag.BoolVar(&verbose, "v", false, "debug logs")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "otel: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	level := slog.LevelError // the planned failure logs a warning
	if verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "otel:", err)
		os.Exit(1)
	}
}

// checkout is the state of an otel.checkout task.
type checkout struct {
	Items   int  `json:"items"`
	Spawned bool `json:"spawned,omitempty"`
	Heard   int  `json:"heard"`
	Total   int  `json:"total"`
}

// item is the state of an otel.item task: its position in the checkout.
type item struct {
	N int `json:"n"`
}

func pollCheckout(ctx context.Context, t *executor.Task[checkout, json.RawMessage]) (executor.Action, error) {
	s := &t.State
	if !s.Spawned {
		s.Spawned = true
		for n := 1; n <= s.Items; n++ {
			t.Spawn(itemType, item{N: n}, nil)
		}
		return executor.Suspend(), nil
	}
	for {
		m, ok := t.Inbox.Pop()
		if !ok {
			break
		}
		if !m.Done || m.Err != "" {
			continue
		}
		var price int
		if err := json.Unmarshal(m.Body, &price); err != nil {
			return executor.Action{}, fmt.Errorf("item result %s: %w", m.Body, err)
		}
		s.Heard++
		s.Total += price
	}
	if s.Heard == s.Items {
		return executor.DoneWith(s.Total), nil
	}
	return executor.Suspend(), nil
}

func pollItem(ctx context.Context, t *executor.Task[item, json.RawMessage]) (executor.Action, error) {
	if t.State.N == 1 && t.Failures == 0 {
		return executor.Action{}, errors.New("price service unavailable")
	}
	return executor.DoneWith(t.State.N), nil // the item's price
}

func run(ctx context.Context, cfg config, stdout io.Writer) error {
	if cfg.Items < 1 {
		return fmt.Errorf("-items %d: want at least one item", cfg.Items)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	tg := findTarget(cfg.DatabaseURL)
	if err := tg.ensureDatabase(ctx); err != nil {
		return err
	}
	pc, err := pgxpool.ParseConfig(tg.ConnString)
	if err != nil {
		return fmt.Errorf("invalid database URL: %w", err) // pgx's error names it, masked
	}
	db, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return tg.Wrap("open pool on", err)
	}
	defer db.Close()
	if err := corosql.Migrate(ctx, db); err != nil {
		return tg.Wrap("migrate", err)
	}

	// The OpenTelemetry SDK, exporting to stdout. A real application sets
	// these up once, often as the global providers.
	var traceOpts []stdouttrace.Option
	metricOpts := []stdoutmetric.Option{stdoutmetric.WithWriter(stdout)}
	if cfg.Pretty {
		traceOpts = append(traceOpts, stdouttrace.WithPrettyPrint())
		metricOpts = append(metricOpts, stdoutmetric.WithPrettyPrint())
	}
	spanExporter, err := stdouttrace.New(append(traceOpts, stdouttrace.WithWriter(stdout))...)
	if err != nil {
		return err
	}
	metricExporter, err := stdoutmetric.New(metricOpts...)
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spanExporter))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metricExporter, sdkmetric.WithInterval(time.Minute))))

	// corotask's part: hooks on those providers, set in the executor's Config.
	hooks, err := otelcorotask.New(otelcorotask.Config{MeterProvider: mp, TracerProvider: tp, DB: db})
	if err != nil {
		return err
	}
	defer hooks.Close()
	e, err := executor.New(db, executor.Config{Concurrency: 10, Hooks: hooks, Logger: cfg.Logger,
		BackoffMin: 10 * time.Millisecond, BackoffMax: time.Second})
	if err != nil {
		return err
	}
	executor.Register(e, checkoutType, executor.PollerFunc[checkout, json.RawMessage](pollCheckout))
	executor.Register(e, itemType, executor.PollerFunc[item, json.RawMessage](pollItem))

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	ran := make(chan error, 1)
	go func() { ran <- e.Run(runCtx) }()

	// The request that creates the checkout has its own span; the trace
	// context otelcorotask.WithTrace attaches is stored with the task, and
	// the checkout's poll spans link to that span. The items, spawned by a
	// poll, link to that poll's span in turn.
	reqCtx, req := tp.Tracer("example/checkout").Start(ctx, "checkout request")
	id, err := tasks.Create(otelcorotask.WithTrace(reqCtx), db, tasks.Spec{Type: checkoutType, State: checkout{Items: cfg.Items}})
	req.End()
	if err != nil {
		return fmt.Errorf("create checkout: %w", err)
	}
	done, err := tasks.Wait(ctx, db, id)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; the checkout is left in the database: cancel it with %s", tg.Commands("cancel "+id.String()))
		}
		return err
	}
	stopRun()
	if err := <-ran; err != nil {
		return err
	}
	// Shutting the providers down exports what is left: the spans are
	// already out (WithSyncer); the metrics are collected now.
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := errors.Join(tp.Shutdown(shutCtx), mp.Shutdown(shutCtx)); err != nil {
		return fmt.Errorf("export telemetry: %w", err)
	}
	if done.Status != tasks.StatusDone {
		return fmt.Errorf("checkout %s %s: %s", id, done.Status, done.LastError)
	}
	fmt.Fprintf(stdout, "checkout %s done: %d items, total %s\n", id, cfg.Items, done.Result)
	return nil
}
