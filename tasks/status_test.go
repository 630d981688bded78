package tasks_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A ready task that flow control holds back is paused (its type is) or
// limited (its type's maximum, its key's limit or its rate limit); one of a
// controlled type that none of them holds, and one of a type without
// controls, is ready. The controls are set by SQL here, as the claim reads
// them: the status is what the table says, whoever wrote it.
func TestStatusOfFlowControl(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	create := func(typ tasks.Type) tasks.ID {
		t.Helper()
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: typ})
		require.NoError(t, err)
		return id
	}
	// run makes a task of typ running, with the limit key given (none for
	// ""), and counted toward the type's maximum or not.
	run := func(typ tasks.Type, key string, counted bool) tasks.ID {
		t.Helper()
		id := create(typ)
		exec(`UPDATE corotask.tasks SET claim = gen_random_uuid(), heartbeat = now(), claim_expires_at = now() + interval '1 hour',
			limit_key = nullif($2, ''), counted = $3 WHERE task_id = $1`, id, key, counted)
		return id
	}
	keyed := func(typ tasks.Type, key string) tasks.ID {
		t.Helper()
		id := create(typ)
		exec(`UPDATE corotask.tasks SET limit_key = $2 WHERE task_id = $1`, id, key)
		return id
	}

	exec(`INSERT INTO corotask.type_controls (task_type, paused_at, paused_by) VALUES ('s.paused', now(), 'ops')`)
	exec(`INSERT INTO corotask.type_controls (task_type, max_running) VALUES ('s.full', 1), ('s.room', 2)`)
	exec(`INSERT INTO corotask.key_limits (key_space, max_running) VALUES ('tenants', 1)`)
	exec(`INSERT INTO corotask.type_controls (task_type, key_space) VALUES ('s.keyed', 'tenants'), ('s.keyed2', 'tenants')`)
	exec(`INSERT INTO corotask.rate_limits (name, rate, per, tokens, refilled_at) VALUES
		('empty', 10, interval '1 hour', 0, corotask.now()), ('full', 10, interval '1 hour', 10, corotask.now())`)
	exec(`INSERT INTO corotask.type_controls (task_type, rate_limit) VALUES ('s.dry', 'empty'), ('s.wet', 'full')`)

	// s.full runs its one counted claim; s.room one of two; an uncounted
	// claim (taken before the maximum was set) and an expired one do not
	// count.
	run("s.full", "", true)
	run("s.room", "", true)
	run("s.room", "", false)
	expired := run("s.room", "", true)
	exec(`UPDATE corotask.tasks SET claim_expires_at = now() - interval '1 minute' WHERE task_id = $1`, expired)
	// Key "acme" of the space runs once, through the other type of the
	// space: its tasks of s.keyed wait; those of key "other" or none do not.
	run("s.keyed2", "acme", false)

	want := map[tasks.ID]tasks.Status{
		create("s.paused"):              tasks.StatusPaused,
		create("s.full"):                tasks.StatusLimited,
		create("s.room"):                tasks.StatusReady,
		keyed("s.keyed", "acme"):        tasks.StatusLimited,
		keyed("s.keyed", "other"):       tasks.StatusReady,
		create("s.keyed"):               tasks.StatusReady,
		create("s.dry"):                 tasks.StatusLimited,
		create("s.wet"):                 tasks.StatusReady,
		create("s.free"):                tasks.StatusReady,
		keyed("s.uncontrolled", "acme"): tasks.StatusReady,
	}
	for id, st := range want {
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		require.Equal(t, st, task.Status, "task %s of %s", id, task.Type)
	}
	for _, st := range []tasks.Status{tasks.StatusPaused, tasks.StatusLimited} {
		list, err := tasks.List(ctx, db, tasks.Filter{Status: st})
		require.NoError(t, err)
		var got []tasks.ID
		for _, task := range list {
			got = append(got, task.ID)
		}
		var ids []tasks.ID
		for id, s := range want {
			if s == st {
				ids = append(ids, id)
			}
		}
		require.ElementsMatch(t, ids, got, "tasks listed as %s", st)
	}

	// A paused type's task that is sleeping stays sleeping: only ready
	// tasks wait on flow control.
	sleeping := create("s.paused")
	exec(`UPDATE corotask.tasks SET wake_at = now() + interval '1 hour' WHERE task_id = $1`, sleeping)
	task, err := tasks.Get(ctx, db, sleeping)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusSleeping, task.Status)

	// The bucket refills: an hour on, the empty one holds its 10 tokens.
	exec(`UPDATE corotask.rate_limits SET refilled_at = corotask.now() - interval '1 hour' WHERE name = 'empty'`)
	for id, st := range want {
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		if task.Type == "s.dry" {
			require.Equal(t, tasks.StatusReady, task.Status)
		} else {
			require.Equal(t, st, task.Status, "task %s of %s", id, task.Type)
		}
	}
}
