package executor_test

// A database error that is the database's fault (a lock wait past
// statement_timeout, a lock not available) is retried, not counted against
// the poll; an error in what the poll wrote still fails it.

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestTransientOnCommitErrorsAreRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, lock, code string
	}{
		// A lock wait cut short by statement_timeout: 57014.
		{"statement_timeout", `SET LOCAL statement_timeout = '100ms'; SELECT n FROM public.gate FOR UPDATE`, "57014"},
		// A lock that is not available: 55P03.
		{"lock_not_available", `SELECT n FROM public.gate FOR UPDATE NOWAIT`, "55P03"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t)
			_, err := db.Exec(ctx, `CREATE TABLE public.gate (n int); INSERT INTO public.gate VALUES (1);
				CREATE TABLE public.written (n int)`)
			require.NoError(t, err)

			// Another transaction holds the row until the commit is tried again.
			holder, err := db.Begin(ctx)
			require.NoError(t, err)
			_, err = holder.Exec(ctx, `SELECT n FROM public.gate FOR UPDATE`)
			require.NoError(t, err)
			retried := make(chan struct{})
			var closeRetried sync.Once
			released := make(chan error, 1)
			go func() {
				<-retried
				released <- holder.Rollback(ctx)
			}()
			t.Cleanup(func() { closeRetried.Do(func() { close(retried) }) })

			logs := newLogRecorder()
			cfg := badConfig(t)
			cfg.Logger = slog.New(logs)
			e := executor.MustNew(db, cfg)
			var attempts atomic.Int32
			executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
				t.State++
				t.OnCommit(func(ctx context.Context, tx pgx.Tx) error {
					if attempts.Add(1) == 2 {
						closeRetried.Do(func() { close(retried) })
					}
					if _, err := tx.Exec(ctx, tc.lock); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, `INSERT INTO public.written VALUES (1)`)
					return err
				})
				return executor.DoneWith("ok"), nil
			}), executor.MaxFailures(1))
			id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
			require.NoError(t, err)

			n, err := e.PollOnce(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.GreaterOrEqual(t, attempts.Load(), int32(2), "the commit was tried again")
			require.NoError(t, <-released)
			require.NotEmpty(t, logs.containing(tc.code), "the first attempt met %s", tc.code)
			task, err := tasks.Get(ctx, db, id)
			require.NoError(t, err)
			require.Equal(t, tasks.StatusDone, task.Status, "last error: %s", task.LastError)
			require.Zero(t, task.Failures)
			require.Empty(t, task.LastError)
			require.JSONEq(t, "1", string(task.State))
			var written int
			require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM public.written`).Scan(&written))
			require.Equal(t, 1, written, "OnCommit's writes happen exactly once")
		})
	}
}

func TestPermanentCommitErrorsFailThePoll(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// effect asks for something the database refuses, given the id of
		// an ended task.
		effect func(t *executor.Task[int, int], ended tasks.ID)
		want   string
	}{
		{"unique violation in OnCommit", func(t *executor.Task[int, int], _ tasks.ID) {
			t.OnCommit(func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO public.uniq VALUES (1)`)
				return err
			})
		}, "23505"},
		{"error raised in OnCommit", func(t *executor.Task[int, int], _ tasks.ID) {
			t.OnCommit(func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'no such order'; END $$`)
				return err
			})
		}, "no such order"},
		{"message to an ended task", func(t *executor.Task[int, int], ended tasks.ID) {
			t.Send(ended, 1)
		}, "ended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t)
			_, err := db.Exec(ctx, `CREATE TABLE public.uniq (n int PRIMARY KEY); INSERT INTO public.uniq VALUES (1)`)
			require.NoError(t, err)
			ended, err := tasks.Create(ctx, db, tasks.Spec{Type: "other"})
			require.NoError(t, err)
			require.NoError(t, tasks.Cancel(ctx, db, ended))

			e := executor.MustNew(db, badConfig(t))
			var polls atomic.Int32
			executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
				polls.Add(1)
				t.State++
				tc.effect(t, ended)
				return executor.Suspend(), nil
			}), executor.MaxFailures(1))
			id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
			require.NoError(t, err)

			_, err = e.PollOnce(ctx)
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, int32(1), polls.Load())
			task, err := tasks.Get(ctx, db, id)
			require.NoError(t, err)
			require.Equal(t, tasks.StatusFailed, task.Status, "MaxFailures(1) ends the task")
			require.Equal(t, 1, task.Failures)
			require.Contains(t, task.LastError, tc.want)
			require.Empty(t, task.State, "nothing of the poll was committed")
		})
	}
}

// An OnCommit that ignores the error of one of its statements and goes on
// writing gets 25P02 (the transaction is aborted): its own fault, so the poll
// fails at once instead of the commit being retried.
func TestOnCommitOnAnAbortedTransactionFailsThePoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	// Backed off for an hour: the test sees the first failure, however
	// slowly it looks.
	cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
	e := executor.MustNew(db, cfg)
	var onCommits atomic.Int32
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		t.OnCommit(func(ctx context.Context, tx pgx.Tx) error {
			onCommits.Add(1)
			_, _ = tx.Exec(ctx, `SELECT 1/0`) // its error ignored, by mistake
			_, err := tx.Exec(ctx, `SELECT 1`)
			return err
		})
		return executor.Sleep(time.Hour), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	start(t, e)
	task := waitStatus(t, db, id, tasks.StatusRetrying)
	require.Equal(t, 1, task.Failures)
	require.Contains(t, task.LastError, "25P02")
	require.Equal(t, int32(1), onCommits.Load(), "not retried")
}
