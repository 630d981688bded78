package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// orderedPoller records the order in which tasks' polls start (by state),
// and blocks the polls of the states in block until their channel closes.
type orderedPoller struct {
	mu    sync.Mutex
	order []string
	block map[string]chan struct{}
	g     gauge
}

func (p *orderedPoller) poll(ctx context.Context, t *executor.Task[string, int]) (executor.Action, error) {
	defer p.g.enter()()
	p.mu.Lock()
	p.order = append(p.order, t.State)
	gate := p.block[t.State]
	p.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return executor.Action{}, ctx.Err()
		}
	}
	return executor.Done(), nil
}

func (p *orderedPoller) started(state string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.order {
		if s == state {
			return true
		}
	}
	return false
}

func (p *orderedPoller) polled() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.order...)
}

// priorityClaims counts the priority lane's claims that began after since.
type priorityClaims struct {
	executor.NoHooks
	mu    sync.Mutex
	since time.Time
	n     int
}

func (h *priorityClaims) ClaimDone(_ context.Context, info *executor.ClaimInfo) {
	began := time.Now().Add(-info.Duration)
	h.mu.Lock()
	defer h.mu.Unlock()
	if info.Priority && info.Err == nil && !h.since.IsZero() && began.After(h.since) {
		h.n++
	}
}

func (h *priorityClaims) from(t time.Time) {
	h.mu.Lock()
	h.since, h.n = t, 0
	h.mu.Unlock()
}

func (h *priorityClaims) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// holdSlots starts an executor of type "job", polled by p, with cfg's
// Concurrency, PrioritySlots and Hooks, creates task "a" (priority 0), and
// returns once a's poll runs (holding a slot while p blocks it).
func holdSlots(t *testing.T, p *orderedPoller, concurrency, prioritySlots int, hooks executor.Hooks) *pgxpool.Pool {
	t.Helper()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.Concurrency, cfg.PrioritySlots = concurrency, prioritySlots
	if hooks != nil {
		cfg.Hooks = hooks
	}
	e := executor.MustNew(db, cfg)
	executor.Register(e, "job", executor.PollerFunc[string, int](p.poll))
	start(t, e)
	_, err := tasks.Create(context.Background(), db, tasks.Spec{Type: "job", State: "a"})
	require.NoError(t, err)
	waitFor(t, "a's poll", func() bool { return p.started("a") })
	return db
}

// With its one slot busy, an executor with a priority slot starts a task of
// a priority above 0 at once, in that slot, and leaves a task of priority 0
// for the busy slot.
func TestPrioritySlotStartsUrgentWorkBehindBusySlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &orderedPoller{block: map[string]chan struct{}{"a": make(chan struct{})}}
	db := holdSlots(t, p, 1, 1, nil)
	_, err := tasks.CreateMany(ctx, db, []tasks.Spec{
		{Type: "job", State: "b"},
		{Type: "job", State: "c", Priority: 5},
	})
	require.NoError(t, err)
	waitFor(t, "c's poll, while a's holds the executor's slot", func() bool { return p.started("c") })
	require.False(t, p.started("b"), "a task of priority 0 waits for a slot of the executor's Concurrency")
	close(p.block["a"])
	waitDone(t, db, 3)
	require.Equal(t, []string{"a", "c", "b"}, p.polled())
}

// The priority lane counts against a fleet-wide maximum as every claim
// does: with the type's one running poll taken, a task of a priority above 0
// waits, though a priority slot is free.
func TestPrioritySlotHoldsFleetWideMaximum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &orderedPoller{block: map[string]chan struct{}{"a": make(chan struct{})}}
	claims := &priorityClaims{}
	db := holdSlots(t, p, 2, 2, claims)
	// A maximum of 1, set while a runs: a's poll counts toward it.
	require.NoError(t, tasks.SetMaxRunning(ctx, db, "job", 1))
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", State: "c", Priority: 5})
	require.NoError(t, err)
	claims.from(time.Now())
	// Two claims of the lane that began after c's create committed have
	// seen it ready, and the maximum taken.
	waitFor(t, "the priority lane's claims", func() bool { return claims.count() >= 2 })
	require.False(t, p.started("c"), "the type's maximum is taken")
	close(p.block["a"])
	waitDone(t, db, 2)
	require.Equal(t, []string{"a", "c"}, p.polled())
	require.Equal(t, int64(1), p.g.peak.Load())
}

// Priority slots hold tasks above priority 0 only: with every slot busy,
// the next task above 0 waits for one, and the slot freed first goes to it
// before a task of priority 0 created with it.
func TestPrioritySlotsFullWaitForASlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &orderedPoller{block: map[string]chan struct{}{"a": make(chan struct{}), "c": make(chan struct{})}}
	db := holdSlots(t, p, 1, 1, nil)
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", State: "c", Priority: 1})
	require.NoError(t, err)
	waitFor(t, "c's poll in the priority slot", func() bool { return p.started("c") })
	_, err = tasks.CreateMany(ctx, db, []tasks.Spec{
		{Type: "job", State: "b"},
		{Type: "job", State: "d", Priority: 3},
	})
	require.NoError(t, err)
	close(p.block["a"])
	waitFor(t, "d's poll, in a's slot", func() bool { return p.started("d") })
	require.Equal(t, []string{"a", "c", "d"}, p.polled()[:3])
	close(p.block["c"])
	waitDone(t, db, 4)
	require.Equal(t, []string{"a", "c", "d", "b"}, p.polled())
	require.Equal(t, int64(2), p.g.peak.Load())
}
