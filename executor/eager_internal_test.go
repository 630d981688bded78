package executor

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A batch whose reply is lost may have created its children claimed by an
// executor that will not poll them: their claims are released, whether the
// batch had committed before the release or commits while the release
// waits for its parent's lock.
func TestChildrenOfALostReplyAreReleased(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"committed", "still running"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t)
			e := MustNew(db, Config{Logger: testdb.Logger(t)})
			Register(e, "child", PollerFunc[any, any](func(context.Context, *Task[any, any]) (Action, error) {
				return Done(), nil
			}))
			e.slots.mu.Lock()
			e.slots.pollBase = ctx
			e.slots.mu.Unlock()

			parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "root"})
			require.NoError(t, err)
			claim := testdb.Claim(t, db, parent, 1)
			child := tasks.NewID()
			out := &outcome{state: []byte("null"), action: AwaitChildren()}
			out.spawns = []tasks.Spec{{ID: child, Type: "child", State: []byte("null")}}
			batch := []*pendingCommit{{c: &claimed{id: parent, typ: "root", claim: claim, attempt: 1}, out: out, history: 1}}
			plan := e.committer.reserveChildren(batch)
			require.NotNil(t, plan)
			args, err := e.committer.commitArgs(batch)
			require.NoError(t, err)

			tx, err := db.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			rows, err := tx.Query(ctx, query.CommitPolls, args)
			require.NoError(t, err)
			rows.Close()
			require.NoError(t, rows.Err())
			if name == "committed" {
				require.NoError(t, tx.Commit(ctx))
			}

			e.committer.dropChildren(batch, plan, io.ErrUnexpectedEOF) // the reply was lost
			if name == "still running" {
				require.Eventually(t, func() bool {
					var waiting int
					require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
						WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
					return waiting > 0
				}, testdb.Patience, 10*time.Millisecond, "the release waits for the batch's lock on the parent")
				require.NoError(t, tx.Commit(ctx))
			}
			e.polls.wg.Wait()

			c, err := tasks.Get(ctx, db, child)
			require.NoError(t, err, "the batch created the child")
			require.NotEqual(t, tasks.StatusRunning, c.Status, "its claim was released")
			require.True(t, c.ClaimedBy.IsZero())
			require.Zero(t, c.Failures)
			e.slots.mu.Lock()
			require.Zero(t, e.slots.polling)
			require.Zero(t, e.slots.reserved)
			require.Zero(t, e.slots.perType["child"])
			e.slots.mu.Unlock()
		})
	}
}
