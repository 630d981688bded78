package otelcorotask

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// readyQueryTimeout bounds the gauges' query, which runs within a
// collection.
const readyQueryTimeout = 5 * time.Second

// readyGauges computes the ready-tasks gauges at most once per interval, when
// they are collected, and keeps the values for the collections in between.
//
// Why per process, and at collection: sharing one computation across the
// fleet needs somewhere to keep it (a table), and the query is cheap and
// bounded (an index-only scan of at most limit entries); computing at
// collection costs nothing where the gauges are not read.
type readyGauges struct {
	db       tasks.DB
	interval time.Duration
	limit    int
	log      *slog.Logger
	count    metric.Int64ObservableGauge
	age      metric.Float64ObservableGauge

	refreshing sync.Mutex // held while the query runs

	mu     sync.Mutex
	tried  time.Time             // local time of the last query
	at     time.Time             // local time of the last successful one (zero: none yet)
	stats  map[tasks.Type]*ready // from the last successful query
	known  map[tasks.Type]bool   // types reported even with no ready task
	typeOf map[tasks.Type]attribute.Set
}

type ready struct {
	n   int64
	age float64 // seconds, at the query
}

func newReadyGauges(m metric.Meter, cfg Config) (*readyGauges, metric.Registration, error) {
	g := &readyGauges{
		db:       cfg.DB,
		interval: cmp.Or(cfg.ReadyInterval, 15*time.Second),
		limit:    cmp.Or(cfg.ReadyLimit, 100_000),
		log:      cmp.Or(cfg.Logger, slog.Default()),
		stats:    map[tasks.Type]*ready{},
		known:    map[tasks.Type]bool{},
		typeOf:   map[tasks.Type]attribute.Set{},
	}
	var err error
	if g.count, err = m.Int64ObservableGauge("corotask.tasks.ready", metric.WithUnit("{task}"),
		metric.WithDescription("Tasks ready to be polled now, all executors together.")); err != nil {
		return nil, nil, err
	}
	if g.age, err = m.Float64ObservableGauge("corotask.tasks.ready.oldest_age", metric.WithUnit("s"),
		metric.WithDescription("How long the oldest ready task has waited past its wake_at.")); err != nil {
		return nil, nil, err
	}
	reg, err := m.RegisterCallback(g.observe, g.count, g.age)
	if err != nil {
		return nil, nil, err
	}
	return g, reg, nil
}

// know adds types to those reported with zero ready tasks.
func (g *readyGauges) know(types []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range types {
		g.known[tasks.Type(t)] = true
	}
}

func (g *readyGauges) observe(ctx context.Context, o metric.Observer) error {
	g.refresh(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at.IsZero() {
		return nil // no value yet
	}
	since := time.Since(g.at).Seconds()
	var total int64
	for _, r := range g.stats {
		total += r.n
	}
	// With ReadyLimit tasks read, a type not among them may have ready
	// tasks too: it is not reported rather than reported as 0.
	for typ := range g.known {
		if g.stats[typ] == nil && total < int64(g.limit) {
			opt := metric.WithAttributeSet(g.set(typ))
			o.ObserveInt64(g.count, 0, opt)
			o.ObserveFloat64(g.age, 0, opt)
		}
	}
	for typ, r := range g.stats {
		opt := metric.WithAttributeSet(g.set(typ))
		o.ObserveInt64(g.count, r.n, opt)
		// The oldest task has waited longer since, unless it was polled.
		o.ObserveFloat64(g.age, max(r.age, 0)+since, opt)
	}
	return nil
}

// set returns the attributes of typ. g.mu is held.
func (g *readyGauges) set(typ tasks.Type) attribute.Set {
	s, ok := g.typeOf[typ]
	if !ok {
		s = attribute.NewSet(attribute.String("task.type", string(typ)))
		g.typeOf[typ] = s
	}
	return s
}

// refresh runs the query if the values are older than the interval and no
// other collection is running it.
func (g *readyGauges) refresh(ctx context.Context) {
	if !g.refreshing.TryLock() {
		return
	}
	defer g.refreshing.Unlock()
	g.mu.Lock()
	fresh := !g.tried.IsZero() && time.Since(g.tried) < g.interval
	g.mu.Unlock()
	if fresh {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, readyQueryTimeout)
	defer cancel()
	stats, err := g.query(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tried = time.Now()
	if err != nil {
		// Keep the last values; try again next interval rather than at
		// every collection.
		g.log.Warn("corotask: ready-tasks gauges: query failed", "error", err)
		return
	}
	g.stats, g.at = stats, g.tried
}

func (g *readyGauges) query(ctx context.Context) (map[tasks.Type]*ready, error) {
	rows, err := g.db.Query(ctx, query.ReadyOldestByType, g.limit)
	if err != nil {
		return nil, dberr.Translate(err)
	}
	defer rows.Close()
	stats := map[tasks.Type]*ready{}
	for rows.Next() {
		var typ string
		r := &ready{}
		if err := rows.Scan(&typ, &r.n, &r.age); err != nil {
			return nil, err
		}
		stats[tasks.Type(typ)] = r
	}
	return stats, dberr.Translate(rows.Err())
}
