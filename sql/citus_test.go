package sql_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// On a Citus cluster (COROTASK_CITUS_URL), sql.Distribute
// distributes tasks, messages and history by root_id, colocated, and makes
// the small tables reference tables; run again, it changes nothing. Trees
// created in one call, with their first messages and a message sent to
// one of their tasks, land whole in one group of colocated shards (one
// range of hash values, one worker) each, and the trees spread over the
// workers.
func TestCitusDistributesEachTreeWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)

	layout := func() map[string]string {
		t.Helper()
		rows, err := db.Query(ctx, `SELECT logicalrelid::text,
				CASE partmethod WHEN 'h' THEN 'hash ' || column_to_column_name(logicalrelid, partkey) || ' group ' || colocationid
				                WHEN 'n' THEN 'reference' END
			FROM pg_dist_partition WHERE logicalrelid::text LIKE 'corotask.%'`)
		require.NoError(t, err)
		got := map[string]string{}
		for rows.Next() {
			var rel, how string
			require.NoError(t, rows.Scan(&rel, &how))
			got[rel] = how
		}
		require.NoError(t, rows.Err())
		return got
	}
	before := layout()
	group := before["corotask.tasks"]
	require.Regexp(t, `^hash root_id group \d+$`, group)
	require.Equal(t, map[string]string{
		"corotask.tasks": group, "corotask.messages": group, "corotask.history": group,
		"corotask.executors": "reference", "corotask.type_controls": "reference", "corotask.key_limits": "reference",
		"corotask.rate_limits": "reference", "corotask.key_windows": "reference", "corotask.control_history": "reference",
	}, before)
	require.NoError(t, corosql.Distribute(ctx, db), "a second run")
	require.Equal(t, before, layout())

	// Twenty trees of a root, two children (one with a message) and a
	// grandchild, each created in one call; a message sent to the second
	// child.
	roots := map[tasks.ID]bool{}
	for range 20 {
		root, child1, child2, grandchild := tasks.NewID(), tasks.NewID(), tasks.NewID(), tasks.NewID()
		_, err := tasks.CreateMany(ctx, db, []tasks.Spec{
			{ID: root, Type: "job"},
			{ID: child1, Type: "job", Parent: root, Message: "hello"},
			{ID: child2, Type: "job", Parent: root},
			{ID: grandchild, Type: "job", Parent: child1, Message: 2},
		})
		require.NoError(t, err)
		require.NoError(t, inbox.Send(ctx, db, child2, tasks.ID{}, "sent"))
		roots[root] = true
	}
	// An operator's send (corotask send, the UI) is recorded in the
	// history, on the tree's shard too.
	var some tasks.ID
	for root := range roots {
		some = root
		break
	}
	_, err := db.Exec(ctx, `SELECT corotask.operator_send($1, NULL, '"from an operator"')`, some)
	require.NoError(t, err)
	var recorded int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.history
		WHERE task_id = $1 AND root_id = $1 AND outcome = 'operator' AND action = 'send'`, some).Scan(&recorded))
	require.Equal(t, 1, recorded)
	// A child created later under a task of a tree, sleeping, then retried
	// now by an operator: it is in the tree, on its shard.
	late, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", Parent: some, WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.NoError(t, tasks.Retry(ctx, db, late))
	var lateRoot tasks.ID
	var ready bool
	require.NoError(t, db.QueryRow(ctx, `SELECT root_id, wake_at <= now() FROM corotask.tasks WHERE task_id = $1`, late).
		Scan(&lateRoot, &ready))
	require.Equal(t, some, lateRoot)
	require.True(t, ready, "retried: ready now")
	// A cancel of a root ends its whole tree, each task's history saying so.
	n, err := tasks.CancelCount(ctx, db, some)
	require.NoError(t, err)
	require.Equal(t, 5, n, "the root, its two children, the grandchild and the late child")
	var canceled, recordedCancels int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE root_id = $1 AND outcome = 'canceled'`,
		some).Scan(&canceled))
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.history WHERE root_id = $1 AND action = 'cancel'`,
		some).Scan(&recordedCancels))
	require.Equal(t, 5, canceled)
	require.Equal(t, 5, recordedCancels)
	// Each tree's rows, of both tables, are on one shard; the trees are on
	// both workers.
	// Colocated shards of the tables share their range of hash values
	// and their worker.
	type place struct {
		hashes string
		port   int
	}
	placement := map[int64]place{}
	rows, err := db.Query(ctx, `SELECT s.shardid, s.shardminvalue || '..' || s.shardmaxvalue, n.nodeport
		FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid)
		WHERE s.shardminvalue IS NOT NULL`)
	require.NoError(t, err)
	for rows.Next() {
		var shard int64
		var at place
		require.NoError(t, rows.Scan(&shard, &at.hashes, &at.port))
		placement[shard] = at
	}
	require.NoError(t, rows.Err())
	shards := map[tasks.ID]map[place]int{} // tree: its rows per place
	for _, table := range []string{"corotask.tasks", "corotask.messages"} {
		rows, err := db.Query(ctx, `SELECT root_id, get_shard_id_for_distribution_column($1, root_id) FROM `+table, table)
		require.NoError(t, err)
		for rows.Next() {
			var root tasks.ID
			var shard int64
			require.NoError(t, rows.Scan(&root, &shard))
			require.True(t, roots[root], "root %s", root)
			require.Contains(t, placement, shard)
			if shards[root] == nil {
				shards[root] = map[place]int{}
			}
			shards[root][placement[shard]]++
		}
		require.NoError(t, rows.Err())
	}
	require.Len(t, shards, 20)
	ports := map[int]bool{}
	for root, on := range shards {
		require.Len(t, on, 1, "tree %s", root)
		for at, n := range on {
			want := 7 // four tasks and three messages
			if root == some {
				want += 2 // and the operator's message, and the late child
			}
			require.Equal(t, want, n, "tree %s", root)
			ports[at.port] = true
		}
	}
	require.Greater(t, len(ports), 1, "the trees are on more than one worker")
}
