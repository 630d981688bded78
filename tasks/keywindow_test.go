package tasks_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// Within its type's key window, a key whose task ended is refused, naming
// that task; once the window has passed, or without a window, it is free.
func TestKeyWindowRefusesCreateWithinIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := corotasktest.NewClock()
	db := corotasktest.NewDB(t, corotasktest.WithClock(clock))
	require.NoError(t, tasks.SetKeyWindow(ctx, db, "order", time.Hour))
	got, err := tasks.KeyWindow(ctx, db, "order")
	require.NoError(t, err)
	require.Equal(t, time.Hour, got)

	first, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order-42"})
	require.NoError(t, err)
	// While it is live, the key is refused as without a window.
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order-42"})
	var exists *tasks.ExistsError
	require.ErrorAs(t, err, &exists)
	require.Equal(t, first, exists.ID)
	require.NoError(t, tasks.Cancel(ctx, db, first))

	clock.Advance(59 * time.Minute)
	for _, create := range map[string]func() error{
		"Create": func() error {
			_, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order-42"})
			return err
		},
		"CreateMany": func() error {
			_, err := tasks.CreateMany(ctx, db, []tasks.Spec{{Type: "order", Key: "order-7"}, {Type: "order", Key: "order-42"}})
			return err
		},
	} {
		err := create()
		require.ErrorIs(t, err, tasks.ErrExists)
		require.ErrorAs(t, err, &exists)
		require.Equal(t, first, exists.ID)
		require.ErrorContains(t, err, first.String())
		require.ErrorContains(t, err, `"order-42"`)
		require.ErrorContains(t, err, "key window of 01:00:00")
	}
	_, err = tasks.GetByKey(ctx, db, "order", "order-7")
	require.ErrorIs(t, err, tasks.ErrNotFound, "the refused CreateMany created nothing")

	// Tasks without a key, and types without a window, are not concerned.
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "order"})
	require.NoError(t, err)
	invoice, err := tasks.Create(ctx, db, tasks.Spec{Type: "invoice", Key: "order-42"})
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, db, invoice))
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "invoice", Key: "order-42"})
	require.NoError(t, err)

	// At the window's end the key is free again.
	clock.Advance(time.Minute)
	second, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order-42"})
	require.NoError(t, err)
	require.NotEqual(t, first, second)

	// Removing the window frees the key at once.
	require.NoError(t, tasks.Cancel(ctx, db, second))
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order-42"})
	require.ErrorIs(t, err, tasks.ErrExists)
	require.NoError(t, tasks.SetKeyWindow(ctx, db, "order", 0))
	got, err = tasks.KeyWindow(ctx, db, "order")
	require.NoError(t, err)
	require.Zero(t, got)
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order-42"})
	require.NoError(t, err)
}

// A create that races the end of the key's task waits for it and is
// refused: it does not slip in between the end and the window.
func TestKeyWindowCreateRacingTheEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	require.NoError(t, tasks.SetKeyWindow(ctx, db, "order", time.Hour))
	holder, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "k"})
	require.NoError(t, err)

	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	require.NoError(t, tasks.Cancel(ctx, tx, holder))
	created := make(chan error, 1)
	go func() {
		_, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "k"})
		created <- err
	}()
	testdb.WaitForLockWait(t, db)
	require.NoError(t, tx.Commit(ctx))
	err = <-created
	var exists *tasks.ExistsError
	require.ErrorAs(t, err, &exists)
	require.Equal(t, holder, exists.ID)
	require.ErrorContains(t, err, "key window")
}

func TestSetKeyWindowRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	for _, c := range []struct {
		typ  tasks.Type
		d    time.Duration
		want string
	}{
		{"order", -time.Second, "key window of order: -1s is negative (0 removes it)"},
		{"order", time.Nanosecond, "key window of order: 1ns is below a microsecond"},
		{"", time.Hour, "invalid task type: empty"},
		{" order", time.Hour, "leading or trailing space"},
	} {
		require.ErrorContains(t, tasks.SetKeyWindow(ctx, db, c.typ, c.d), c.want)
	}
	got, err := tasks.KeyWindow(ctx, db, "order")
	require.NoError(t, err)
	require.Zero(t, got, "nothing was set")
	// SQL that writes the table directly meets its CHECK.
	_, err = db.Exec(ctx, `INSERT INTO corotask.key_windows VALUES ('order', '0')`)
	require.ErrorContains(t, err, "key_windows_keep_check")
}
