package tasks_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// An error of corotask's own condition raised by the database wraps both the
// sentinel and the driver's *pgconn.PgError, and names the task.
func TestDatabaseErrorsKeepTheSentinelAndThePgError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, db, id))

	for _, c := range []struct {
		name     string
		err      error
		sentinel error
		code     string
	}{
		{"send to an ended task", inbox.Send(ctx, db, id, tasks.ID{}, 1), tasks.ErrEnded, "CT410"},
		{"send to no task", inbox.Send(ctx, db, tasks.NewID(), tasks.ID{}, 1), tasks.ErrNotFound, "CT404"},
		{"cancel an ended task", tasks.Cancel(ctx, db, id), tasks.ErrEnded, "CT410"},
		{"create a task that exists", func() error { _, err := tasks.Create(ctx, db, tasks.Spec{ID: id, Type: "a"}); return err }(), tasks.ErrExists, "23505"},
	} {
		require.ErrorIs(t, c.err, c.sentinel, c.name)
		var pg *pgconn.PgError
		require.True(t, errors.As(c.err, &pg), "%s: %v", c.name, c.err)
		require.Equal(t, c.code, pg.Code, c.name)
		if c.sentinel != tasks.ErrNotFound {
			require.ErrorContains(t, c.err, id.String(), c.name)
		}
	}
}
