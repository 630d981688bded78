package executor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// The grants docs/operations.md gives operators are enough to act on tasks
// and read their history, and acting needs them.
func TestOperatorRoleGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	admin := testdb.Pool(t, url)
	suffix := strings.ToLower(tasks.NewID().String()[16:])
	ops, fix := "ops_"+suffix, "ops_fix_"+suffix
	_, err := admin.Exec(ctx, `
		CREATE ROLE `+ops+` NOLOGIN;
		GRANT USAGE ON SCHEMA corotask TO `+ops+`;
		GRANT SELECT ON corotask.tasks, corotask.messages, corotask.history, corotask.executors TO `+ops+`;
		CREATE ROLE `+fix+` NOLOGIN;
		GRANT `+ops+` TO `+fix+`;
		GRANT EXECUTE ON FUNCTION corotask.retry_task(uuid), corotask.reset_failures(uuid),
			corotask.restart_task(uuid), corotask.drop_message(uuid, integer, text),
			corotask.operator_send(uuid, uuid, jsonb, jsonb), corotask.cancel_task(uuid) TO `+fix+`;`)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, r := range []string{fix, ops} {
			_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+r+"; DROP ROLE "+r)
		}
	})
	id, err := tasks.Create(ctx, admin, tasks.Spec{Type: "job", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, admin, id, tasks.ID{}, "x"))
	_, err = admin.Exec(ctx, `UPDATE corotask.tasks SET wake_at = now() + interval '1 hour' WHERE task_id = $1`, id)
	require.NoError(t, err)

	readOnly := poolAs(t, url, ops)
	_, err = tasks.Get(ctx, readOnly, id)
	require.NoError(t, err)
	_, err = tasks.History(ctx, readOnly, id, tasks.HistoryOptions{})
	require.NoError(t, err)
	_, err = tasks.Executors(ctx, readOnly)
	require.NoError(t, err)
	require.ErrorContains(t, tasks.Retry(ctx, readOnly, id), "permission denied")
	require.ErrorContains(t, inbox.SendAsOperator(ctx, readOnly, id, tasks.ID{}, "y"), "permission denied")

	fixer := poolAs(t, url, fix)
	require.NoError(t, tasks.Retry(ctx, fixer, id))
	require.NoError(t, tasks.ResetFailures(ctx, fixer, id))
	require.NoError(t, inbox.SendAsOperator(ctx, fixer, id, tasks.ID{}, "y"))
	require.Equal(t, "send", lastEntry(t, admin, id).Action)
	_, err = tasks.DropMessage(ctx, fixer, id, 1, testdb.InboxDigest(t, admin, id, 1))
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, fixer, id))
	require.ErrorIs(t, tasks.Restart(ctx, fixer, id), tasks.ErrWrongStatus, "canceled, not failed: refused, not denied")
}
