package executor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// poolAs opens a pool whose sessions act as role.
func poolAs(t *testing.T, url, role string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE "+role)
		return err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// The grants documented in docs/operations.md are enough, and no more than
// enough, for an executor and for a service that only sends messages.
func TestLeastPrivilegeRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	// This build's Migrate lets every role read the bookkeeping tables,
	// which executors check the schema against.
	require.NoError(t, corosql.Migrate(ctx, admin))
	suffix := strings.ToLower(tasks.NewID().String()[16:])
	worker, sender := "corotask_worker_"+suffix, "orders_sender_"+suffix
	_, err := admin.Exec(ctx, `
		CREATE ROLE `+worker+` NOLOGIN;
		GRANT USAGE ON SCHEMA corotask TO `+worker+`;
		GRANT SELECT, INSERT, UPDATE, DELETE ON corotask.tasks, corotask.messages, corotask.history, corotask.executors TO `+worker+`;
		GRANT UPDATE ON corotask.type_controls, corotask.key_limits, corotask.rate_limits TO `+worker+`;
		GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA corotask TO `+worker+`;
		CREATE ROLE `+sender+` NOLOGIN;
		GRANT USAGE ON SCHEMA corotask TO `+sender+`;
		GRANT EXECUTE ON FUNCTION corotask.send_to_task(uuid, uuid, jsonb) TO `+sender+`;`)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, r := range []string{worker, sender} {
			_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+r+"; DROP ROLE "+r)
		}
	})

	workerDB := poolAs(t, url, worker)
	e := executor.MustNew(workerDB, fastConfig(t))
	executor.Register(e, "orders.watch", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		if m, ok := t.Inbox.Pop(); ok && m.Body == "paid" {
			t.Spawn("orders.receipt", nil, "print")
			return executor.Suspend(), nil
		}
		return executor.Suspend(), nil
	}))
	executor.Register(e, "orders.receipt", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		return executor.DoneWith("printed"), nil
	}))
	id, err := tasks.Create(ctx, workerDB, tasks.Spec{Type: "orders.watch"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.NoError(t, err)

	senderDB := poolAs(t, url, sender)
	require.NoError(t, inbox.Send(ctx, senderDB, id, tasks.ID{}, "paid"))
	// A message with a trace context goes through send_to_task's traced
	// form, which takes its own grant.
	traced := tasks.WithTrace(ctx, map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	require.ErrorContains(t, inbox.Send(traced, senderDB, id, tasks.ID{}, "noted"), "permission denied")
	_, err = admin.Exec(ctx, `GRANT EXECUTE ON FUNCTION corotask.send_to_task(uuid, uuid, jsonb, jsonb) TO `+sender)
	require.NoError(t, err)
	require.NoError(t, inbox.Send(traced, senderDB, id, tasks.ID{}, "noted"))
	_, err = e.PollOnce(ctx) // the watcher spawns the receipt
	require.NoError(t, err)
	_, err = e.PollOnce(ctx) // the receipt is done and tells its parent
	require.NoError(t, err)
	kids, err := tasks.List(ctx, workerDB, tasks.Filter{Parent: id})
	require.NoError(t, err)
	require.Len(t, kids, 1)
	require.Equal(t, tasks.StatusDone, kids[0].Status)
	n, err := e.DeleteExpired(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, tasks.Cancel(ctx, workerDB, id))

	// The sender can do nothing else.
	_, err = tasks.Get(ctx, senderDB, id)
	require.ErrorContains(t, err, "permission denied")
	_, err = tasks.Create(ctx, senderDB, tasks.Spec{Type: "orders.watch"})
	require.ErrorContains(t, err, "permission denied")
	err = tasks.Cancel(ctx, senderDB, id)
	require.ErrorContains(t, err, "permission denied")
}
