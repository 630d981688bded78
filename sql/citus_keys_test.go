package sql_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// On Citus, where no unique index can hold the live keys, a key is still
// held by one live task of its type: a second create is refused naming the
// holder, as is a key repeated in one call, a restart onto a taken key, and
// a key within its type's window; SendToKey finds the holder; an ended
// task frees its key.
func TestCitusKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)

	first, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order-42"})
	require.NoError(t, err)
	byKey, err := tasks.GetByKey(ctx, db, "order", "order-42")
	require.NoError(t, err)
	require.Equal(t, first, byKey.ID)

	var exists *tasks.ExistsError
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order-42"})
	require.ErrorAs(t, err, &exists, "a second live task with the key")
	require.Equal(t, first, exists.ID)
	// Another type, or another key, is no conflict.
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "invoice", Key: "order-42"})
	require.NoError(t, err)

	a := tasks.NewID()
	_, err = tasks.CreateMany(ctx, db, []tasks.Spec{
		{ID: a, Type: "order", Key: "k"}, {Type: "order"}, {Type: "order", Key: "k"},
	})
	require.ErrorAs(t, err, &exists, "a key twice in one call")
	require.Equal(t, a, exists.ID)
	_, err = tasks.GetByKey(ctx, db, "order", "k")
	require.ErrorIs(t, err, tasks.ErrNotFound, "the refused call created nothing")

	// SendToKey delivers to the holder, and creates the task of a new key.
	sent, err := inbox.SendToKey(ctx, db, "order", "order-42", "hello", nil)
	require.NoError(t, err)
	require.Equal(t, first, sent)
	created, err := inbox.SendToKey(ctx, db, "order", "order-43", "hello", nil)
	require.NoError(t, err)
	got, err := tasks.Get(ctx, db, created)
	require.NoError(t, err)
	require.Equal(t, "order-43", got.Key)
	require.Len(t, got.Inbox, 1)

	// Once its task has ended, the key is free; a restart of the ended
	// task onto the new holder's key is refused, naming it.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET outcome = 'failed', done_at = now(), wake_at = NULL,
		failures = 3, last_error = 'boom' WHERE task_id = $1 AND root_id = $1`, first)
	require.NoError(t, err)
	second, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order-42"})
	require.NoError(t, err)
	err = tasks.Restart(ctx, db, first)
	require.ErrorAs(t, err, &exists, "a restart onto a taken key")
	require.Equal(t, second, exists.ID)
	require.NoError(t, tasks.Cancel(ctx, db, second))
	require.NoError(t, tasks.Restart(ctx, db, first))
	byKey, err = tasks.GetByKey(ctx, db, "order", "order-42")
	require.NoError(t, err)
	require.Equal(t, first, byKey.ID)

	// Within its type's key window, the ended task keeps its key.
	require.NoError(t, tasks.SetKeyWindow(ctx, db, "receipt", time.Hour))
	receipt, err := tasks.Create(ctx, db, tasks.Spec{Type: "receipt", Key: "r"})
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, db, receipt))
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "receipt", Key: "r"})
	require.ErrorAs(t, err, &exists, "a key within its window")
	require.Equal(t, receipt, exists.ID)
	require.ErrorContains(t, err, "key window")
	_, err = inbox.SendToKey(ctx, db, "receipt", "r", "late", nil)
	require.ErrorIs(t, err, tasks.ErrEnded)

	// The creators of a key take turns under a lock and look after it,
	// which a REPEATABLE READ snapshot would not: refused, with the reason.
	err = pgx.BeginTxFunc(ctx, db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		_, err := tasks.Create(ctx, tx, tasks.Spec{Type: "order", Key: "rr"})
		return err
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "0A000", pgErr.Code)
	require.ErrorContains(t, err, "READ COMMITTED")
}

// Creators racing on one key on Citus: one Create wins and the others are
// refused naming it; senders racing on a new key create one task, which
// gets every message.
func TestCitusKeysRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const racers = 8
	db := testdb.Citus(t)
	wide := testdb.PoolOfSize(t, db.Config().ConnString(), racers+1)

	// race runs each racer in a transaction of its own, all begun before
	// any of them acts.
	race := func(act func(tx pgx.Tx, i int) error) []error {
		var ready, wg sync.WaitGroup
		ready.Add(racers)
		release := make(chan struct{})
		errs := make([]error, racers)
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = pgx.BeginFunc(ctx, wide, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
						return err
					}
					ready.Done()
					<-release
					return act(tx, i)
				})
			}()
		}
		ready.Wait()
		close(release)
		wg.Wait()
		return errs
	}

	ids := make([]tasks.ID, racers)
	errs := race(func(tx pgx.Tx, i int) (err error) {
		ids[i], err = tasks.Create(ctx, tx, tasks.Spec{Type: "order", Key: "contested"})
		return err
	})
	holder, err := tasks.GetByKey(ctx, wide, "order", "contested")
	require.NoError(t, err)
	won := 0
	for i, err := range errs {
		if err == nil {
			won++
			require.Equal(t, holder.ID, ids[i])
			continue
		}
		var exists *tasks.ExistsError
		require.ErrorAs(t, err, &exists)
		require.Equal(t, holder.ID, exists.ID)
	}
	require.Equal(t, 1, won)

	errs = race(func(tx pgx.Tx, i int) (err error) {
		ids[i], err = inbox.SendToKey(ctx, tx, "counter", "shared", i, nil)
		return err
	})
	for i, err := range errs {
		require.NoError(t, err)
		require.Equal(t, ids[0], ids[i])
	}
	list, err := tasks.List(ctx, wide, tasks.Filter{Type: "counter"})
	require.NoError(t, err)
	require.Len(t, list, 1)
	task, err := tasks.Get(ctx, wide, ids[0])
	require.NoError(t, err)
	require.Len(t, task.Inbox, racers)
}
