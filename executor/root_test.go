package executor_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// rootsOf returns, for every row of tasks, messages and history that
// belongs to a task of ids, the row's root_id: one map per table, by task.
func rootsOf(t *testing.T, db *pgxpool.Pool, ids []tasks.ID) map[string]map[tasks.ID][]tasks.ID {
	t.Helper()
	got := map[string]map[tasks.ID][]tasks.ID{}
	for _, table := range []string{"tasks", "messages", "history"} {
		got[table] = map[tasks.ID][]tasks.ID{}
		rows, err := db.Query(context.Background(),
			`SELECT task_id, root_id FROM corotask.`+table+` WHERE task_id = ANY ($1::uuid[]) ORDER BY task_id`, ids)
		require.NoError(t, err)
		for rows.Next() {
			var id, root tasks.ID
			require.NoError(t, rows.Scan(&id, &root))
			got[table][id] = append(got[table][id], root)
		}
		require.NoError(t, rows.Err())
	}
	return got
}

// drain polls with e until a PollOnce finds nothing to poll.
func drain(t *testing.T, e *executor.Executor) {
	t.Helper()
	for {
		n, err := e.PollOnce(context.Background())
		require.NoError(t, err)
		if n == 0 {
			return
		}
	}
}

// Every task of a workflow tree, and every message and history row of
// them, carries the tree's root: children spawned by polls (eager or
// claimed), grandchildren, their first messages, messages sent from
// outside and the completions they send up the tree.
func TestTreeRowsCarryTheirRoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, eager := range []bool{true, false} {
		t.Run(map[bool]string{true: "eager", false: "claimed"}[eager], func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t)
			cfg := fastConfig(t)
			cfg.DisableEagerChildren = !eager
			cfg.HistoryKeepFirst, cfg.HistoryKeepLast = 100, 100
			// Nodes and leaves on executors of their own, so that each is
			// polled when the test says.
			nodes, leaves := executor.MustNew(db, cfg), executor.MustNew(db, cfg)
			// A node spawns two children, one of them with a first
			// message: nodes below the root, leaves below those; it then
			// awaits them. A leaf suspends until a message ends it.
			executor.Register(nodes, "node", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
				if t.State < 0 {
					return executor.AwaitChildren(), nil
				}
				kind := tasks.Type("node")
				if t.State == 1 {
					kind = "leaf"
				}
				t.Spawn(kind, t.State+1, nil)
				t.Spawn(kind, t.State+1, "hello")
				t.State = -1
				return executor.AwaitChildren(), nil
			}))
			executor.Register(leaves, "leaf", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
				for {
					m, ok := t.Inbox.Pop()
					if !ok {
						return executor.Suspend(), nil
					}
					if m.Body == "end" {
						return executor.Done(), nil
					}
				}
			}))
			root, err := tasks.Create(ctx, db, tasks.Spec{Type: "node", State: 0})
			require.NoError(t, err)
			drain(t, nodes)
			drain(t, leaves)

			all, err := tasks.List(ctx, db, tasks.Filter{})
			require.NoError(t, err)
			require.Len(t, all, 7, "a root, two nodes, four leaves")
			var ids, leafIDs []tasks.ID
			for _, task := range all {
				ids = append(ids, task.ID)
				require.Equal(t, root, task.Root, "task %s", task.ID)
				got, err := tasks.Get(ctx, db, task.ID)
				require.NoError(t, err)
				require.Equal(t, root, got.Root)
				if task.Type == "leaf" {
					leafIDs = append(leafIDs, task.ID)
				}
			}
			require.Len(t, leafIDs, 4)
			// A message from outside waits in each leaf's inbox.
			for _, leaf := range leafIDs {
				require.NoError(t, inbox.Send(ctx, db, leaf, tasks.ID{}, "wait"))
			}
			rows := rootsOf(t, db, ids)
			for _, leaf := range leafIDs {
				require.Equal(t, []tasks.ID{root}, rows["messages"][leaf], "leaf %s", leaf)
			}
			// The leaves end; their completions wait in the nodes' inboxes.
			for _, leaf := range leafIDs {
				require.NoError(t, inbox.Send(ctx, db, leaf, tasks.ID{}, "end"))
			}
			drain(t, leaves)
			rows = rootsOf(t, db, ids)
			require.Len(t, rows["tasks"], 7)
			require.Len(t, rows["messages"], 2, "the two nodes have completions waiting")
			require.Len(t, rows["history"], 7, "every task has its history")
			for _, table := range []string{"tasks", "messages", "history"} {
				for id, roots := range rows[table] {
					for _, r := range roots {
						require.Equal(t, root, r, "%s row of task %s", table, id)
					}
				}
			}
		})
	}
}
