package tasks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/tasks"
)

// The grants docs/flow-control.md documents are enough to change the
// controls and take tokens, and a role without them can do neither.
func TestControlGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := corotasktest.NewDB(t)
	createTasks(t, db, "job", "", 1)
	suffix := strings.ToLower(tasks.NewID().String()[16:])
	flow, reader, taker := "ops_flow_"+suffix, "ops_"+suffix, "taker_"+suffix
	_, err := db.Exec(ctx, `
		CREATE ROLE `+flow+` NOLOGIN;
		GRANT USAGE ON SCHEMA corotask TO `+flow+`;
		GRANT SELECT ON corotask.tasks, corotask.executors TO `+flow+`;
		GRANT EXECUTE ON FUNCTION
			corotask.pause_type(text, boolean), corotask.resume_type(text),
			corotask.set_max_running(text, integer, boolean), corotask.clear_max_running(text),
			corotask.set_key_limit(text, integer, text[], boolean), corotask.clear_key_limit(text),
			corotask.set_rate_limit(text, integer, interval, text[], boolean), corotask.clear_rate_limit(text)
		TO `+flow+`;
		CREATE ROLE `+reader+` NOLOGIN;
		GRANT USAGE ON SCHEMA corotask TO `+reader+`;
		GRANT SELECT ON corotask.tasks, corotask.executors TO `+reader+`;
		CREATE ROLE `+taker+` NOLOGIN;
		GRANT USAGE ON SCHEMA corotask TO `+taker+`;
		GRANT UPDATE ON corotask.rate_limits TO `+taker+`;`)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, r := range []string{flow, reader, taker} {
			_, _ = db.Exec(context.Background(), "DROP OWNED BY "+r+"; DROP ROLE "+r)
		}
	})
	as := func(role string, fn func(tx pgx.Tx) error) error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+role); err != nil {
				return err
			}
			return fn(tx)
		})
	}

	require.NoError(t, as(flow, func(tx pgx.Tx) error {
		if err := tasks.Pause(ctx, tx, "job"); err != nil {
			return err
		}
		if err := tasks.SetMaxRunning(ctx, tx, "job", 3); err != nil {
			return err
		}
		if err := tasks.SetKeyLimit(ctx, tx, "tenants", 1, []tasks.Type{"job"}); err != nil {
			return err
		}
		return tasks.SetRateLimit(ctx, tx, "api", 5, time.Second, []tasks.Type{"job"})
	}))
	// Every role reads the controls.
	require.NoError(t, as(reader, func(tx pgx.Tx) error {
		c, err := tasks.Controls(ctx, tx)
		require.Len(t, c.Types, 1)
		return err
	}))
	err = as(reader, func(tx pgx.Tx) error { return tasks.Resume(ctx, tx, "job") })
	requireCode(t, err, "42501")
	err = as(reader, func(tx pgx.Tx) error { _, err := tasks.Acquire(ctx, tx, "api", 1); return err })
	requireCode(t, err, "42501")
	require.NoError(t, as(taker, func(tx pgx.Tx) error { _, err := tasks.Acquire(ctx, tx, "api", 1); return err }))
	require.NoError(t, as(flow, func(tx pgx.Tx) error { return tasks.Resume(ctx, tx, "job") }))
}
