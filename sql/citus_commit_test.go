package sql_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// On a Citus cluster (COROTASK_CITUS_URL), a commit that names its polls'
// roots (p_roots, as this build's executors call it) and one that does not
// (as builds before functions release 21 call it, the roots then read over
// every shard) each end their task, tell its parent, and deliver a message
// to a task of another tree, whose root neither names.
func TestCitusCommitWithAndWithoutRoots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	parent, child1, child2 := tasks.NewID(), tasks.NewID(), tasks.NewID()
	_, err := tasks.CreateMany(ctx, db, []tasks.Spec{
		{ID: parent, Type: "p"},
		{ID: child1, Type: "c", Parent: parent},
		{ID: child2, Type: "c", Parent: parent},
	})
	require.NoError(t, err)
	other, err := tasks.Create(ctx, db, tasks.Spec{Type: "o"})
	require.NoError(t, err)
	effects, err := json.Marshal(map[string]any{"send": []map[string]any{{"to": other.UUID(), "msg": "hi"}}})
	require.NoError(t, err)

	for i, c := range []struct {
		child tasks.ID
		roots string
	}{
		{child1, ""},
		{child2, ", p_roots => ARRAY[$4::uuid]"},
	} {
		claim := tasks.NewID()
		_, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim = $2, heartbeat = now(),
			claim_expires_at = now() + interval '1 minute', attempts = 1
			WHERE task_id = $1 AND root_id = $3`, c.child, claim, parent)
		require.NoError(t, err)
		var polled tasks.ID
		require.NoError(t, db.QueryRow(ctx, `SELECT polled FROM corotask.commit_polls(
			p_tasks => ARRAY[$1::uuid], p_claims => ARRAY[$2::uuid], p_states => ARRAY['null'::jsonb],
			p_taken => ARRAY[0], p_actions => ARRAY['done'], p_sleeps => ARRAY[0::float8],
			p_ats => ARRAY[NULL::timestamptz], p_results => ARRAY['1'::jsonb], p_effects => ARRAY[$3::jsonb],
			p_history => ARRAY[1::smallint], p_keep_first => 20, p_keep_last => 100,
			p_parents => ARRAY[$4::uuid], p_claimed_by => NULL, p_claim_secs => NULL,
			p_pop_from => ARRAY[NULL::bigint], p_pop_to => ARRAY[NULL::bigint]`+c.roots+`)`,
			c.child, claim, effects, parent).Scan(&polled))
		require.Equal(t, c.child, polled)

		got, err := tasks.Get(ctx, db, c.child)
		require.NoError(t, err)
		require.Equal(t, tasks.StatusDone, got.Status, "commit %d", i)
		p, err := tasks.Get(ctx, db, parent)
		require.NoError(t, err)
		require.Equal(t, 1-i, p.LiveChildren, "commit %d: its parent counts one child less", i)
		require.Equal(t, i+1, p.InboxLen, "commit %d: its parent holds its completion", i)
		o, err := tasks.Get(ctx, db, other)
		require.NoError(t, err)
		require.Equal(t, i+1, o.InboxLen, "commit %d: the task of the other tree holds its message", i)
	}
}
