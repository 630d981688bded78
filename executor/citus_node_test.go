package executor_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// claimCalls records what each claim statement took.
type claimCalls struct {
	executor.NoHooks
	mu      sync.Mutex
	claimed []int
}

func (h *claimCalls) ClaimDone(_ context.Context, c *executor.ClaimInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claimed = append(h.claimed, c.Claimed)
}

// taking is the counts of the calls that took tasks.
func (h *claimCalls) taking() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int
	for _, n := range h.claimed {
		if n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// On Citus, a claim makes one call per worker, each claiming on every
// shard of its worker that has work: forty tasks, each the root of its own
// tree and so spread over many shards, are claimed in one call per worker.
func TestCitusClaimTakesEachWorkersShardsInOneCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	createN(t, db, "one", 40)
	var shards, nodes int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(DISTINCT s.shard), count(DISTINCT p.groupid) FROM (
		SELECT get_shard_id_for_distribution_column('corotask.tasks', root_id) AS shard FROM corotask.tasks) s
		JOIN pg_dist_placement p ON p.shardid = s.shard`).Scan(&shards, &nodes))
	require.Equal(t, 2, nodes, "the tasks lie on both workers")
	require.Greater(t, shards, 2*nodes, "on several shards of each")

	calls := &claimCalls{}
	cfg := fastConfig(t)
	cfg.Concurrency, cfg.Hooks = 64, calls
	e := executor.MustNew(db, cfg)
	executor.Register(e, "one", executor.PollerFunc[any, any](doneAtOnce))
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 40, n)
	taking := calls.taking()
	require.Len(t, taking, nodes, "one call per worker took them all: %v", taking)
	requireEachPolledOnce(t, db, 40)
}

// On Citus, tasks of a higher priority go before older tasks of either
// worker: within a worker's call at once, and, on the other worker, from
// the claim after the first call there (a worker that left urgent work is
// called first). With one slot, behind forty tasks of priority 0 created
// before them, four urgent tasks are polled among the first five.
func TestCitusClaimTakesUrgentWorkOfEitherWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	createN(t, db, "one", 40)
	urgent := map[tasks.ID]bool{}
	for range 4 {
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: "one", Priority: 5})
		require.NoError(t, err)
		urgent[id] = true
	}

	cfg := fastConfig(t)
	cfg.Concurrency = 1
	e := executor.MustNew(db, cfg)
	var mu sync.Mutex
	var order []tasks.ID
	executor.Register(e, "one", executor.PollerFunc[any, any](
		func(ctx context.Context, task *executor.Task[any, any]) (executor.Action, error) {
			mu.Lock()
			order = append(order, task.ID)
			mu.Unlock()
			return executor.Done(), nil
		}))
	for range len(urgent) + 1 {
		n, err := e.PollOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	polled := 0
	for _, id := range order {
		if urgent[id] {
			polled++
		}
	}
	require.Equal(t, len(urgent), polled, "every urgent task among the first %d polled", len(urgent)+1)
}
