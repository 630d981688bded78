package query_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// Status reads the executors once per statement, where corotask.status
// reads them for each task: the two must agree on every status.
func TestStatusMatchesTheFunction(t *testing.T) {
	t.Parallel()
	db := testdb.Tx(t)
	ctx := context.Background()
	for _, sql := range []string{
		`INSERT INTO corotask.key_limits (key_space, max_running) VALUES ('space', 1)`,
		`INSERT INTO corotask.rate_limits (name, rate, per, tokens, refilled_at) VALUES ('none', 1, interval '1 day', 0, now())`,
		`INSERT INTO corotask.type_controls (task_type, paused_at, max_running, key_space, rate_limit) VALUES
			('paused', now(), NULL, NULL, NULL), ('held', NULL, 1, NULL, NULL), ('dry', NULL, NULL, NULL, 'none'),
			('served', NULL, NULL, 'space', NULL), ('roomy', NULL, 2, NULL, NULL), ('grace', NULL, 1, 'space', NULL)`,
		// Running: held at its maximum; roomy below it; a claim of grace
		// that expired half a second ago, which still counts for a second
		// (its key, g, too).
		`INSERT INTO corotask.tasks (task_id, root_id, task_type, claim, heartbeat, claim_expires_at, counted, limit_key) VALUES
			(gen_random_uuid(), gen_random_uuid(), 'held', gen_random_uuid(), now(), now() + interval '1 hour', true, NULL),
			(gen_random_uuid(), gen_random_uuid(), 'served', gen_random_uuid(), now(), now() + interval '1 hour', false, 'k'),
			(gen_random_uuid(), gen_random_uuid(), 'roomy', gen_random_uuid(), now(), now() + interval '1 hour', true, NULL),
			(gen_random_uuid(), gen_random_uuid(), 'grace', gen_random_uuid(), now(), now() - interval '0.5 seconds', true, 'g')`,
	} {
		_, err := db.Exec(ctx, sql)
		require.NoError(t, err)
	}
	for _, registered := range []bool{false, true} {
		if registered {
			_, err := db.Exec(ctx, `INSERT INTO corotask.executors (executor_id, host, pid, version, task_types, concurrency, expires_at)
				VALUES (gen_random_uuid(), 'h', 1, 'v', '{served,held,dry,roomy,grace}', 1, now() + interval '1 hour'),
				       (gen_random_uuid(), 'h', 2, 'v', '{gone}', 1, now() - interval '1 hour')`)
			require.NoError(t, err)
		}
		for _, sql := range []string{
			`INSERT INTO corotask.tasks (task_id, root_id, task_type) VALUES (gen_random_uuid(), gen_random_uuid(), 'served'), (gen_random_uuid(), gen_random_uuid(), 'gone'), (gen_random_uuid(), gen_random_uuid(), 'other')`,
			// Flow control: a paused type, a type at its maximum, a key at
			// its limit, a rate limit without a token.
			`INSERT INTO corotask.tasks (task_id, root_id, task_type) VALUES (gen_random_uuid(), gen_random_uuid(), 'paused'), (gen_random_uuid(), gen_random_uuid(), 'held'), (gen_random_uuid(), gen_random_uuid(), 'dry'),
				(gen_random_uuid(), gen_random_uuid(), 'roomy'), (gen_random_uuid(), gen_random_uuid(), 'grace')`,
			`INSERT INTO corotask.tasks (task_id, root_id, task_type, limit_key) VALUES (gen_random_uuid(), gen_random_uuid(), 'served', 'g')`,
			`INSERT INTO corotask.tasks (task_id, root_id, task_type, limit_key) VALUES (gen_random_uuid(), gen_random_uuid(), 'served', 'k'),
				(gen_random_uuid(), gen_random_uuid(), 'served', 'other'), (gen_random_uuid(), gen_random_uuid(), 'held', 'k'), (gen_random_uuid(), gen_random_uuid(), 'gone', 'k')`,
			`INSERT INTO corotask.tasks (task_id, root_id, task_type, wake_at) VALUES (gen_random_uuid(), gen_random_uuid(), 'served', now() + interval '1 hour')`,
			`INSERT INTO corotask.tasks (task_id, root_id, task_type, wake_at, failures) VALUES (gen_random_uuid(), gen_random_uuid(), 'served', now() + interval '1 hour', 2)`,
			`INSERT INTO corotask.tasks (task_id, root_id, task_type, wake_at) VALUES (gen_random_uuid(), gen_random_uuid(), 'served', NULL)`,
			`INSERT INTO corotask.tasks (task_id, root_id, task_type, claim, heartbeat, claim_expires_at) VALUES
				(gen_random_uuid(), gen_random_uuid(), 'served', gen_random_uuid(), now(), now() + interval '1 hour'),
				(gen_random_uuid(), gen_random_uuid(), 'served', gen_random_uuid(), now(), now() - interval '1 hour')`,
			`INSERT INTO corotask.tasks (task_id, root_id, task_type, wake_at, done_at, outcome) VALUES
				(gen_random_uuid(), gen_random_uuid(), 'served', NULL, now(), 'done'), (gen_random_uuid(), gen_random_uuid(), 'served', NULL, now(), 'failed'),
				(gen_random_uuid(), gen_random_uuid(), 'served', NULL, now(), 'canceled')`,
		} {
			_, err := db.Exec(ctx, sql)
			require.NoError(t, err)
		}
		rows, err := db.Query(ctx, `WITH `+query.Served+` SELECT t.task_id, `+query.Status+`, corotask.status(t) FROM served s, corotask.tasks t`)
		require.NoError(t, err)
		seen := map[string]bool{}
		for rows.Next() {
			var id tasks.ID
			var ours, theirs string
			require.NoError(t, rows.Scan(&id, &ours, &theirs))
			require.Equal(t, theirs, ours, "task %s", id)
			seen[ours] = true
		}
		require.NoError(t, rows.Err())
		if registered {
			for _, s := range tasks.Statuses {
				require.True(t, seen[string(s)], "no task was %s", s)
			}
		}
	}
}

// The reads' bucket of a rate limit (rateTokens, spelled out for Citus)
// is corotask.rate_limit_tokens': full, empty, refilling, refilled past
// its rate, and refilled in the future (a clock moved back).
func TestRateTokensMatchesTheFunction(t *testing.T) {
	t.Parallel()
	db := testdb.Tx(t)
	ctx := context.Background()
	_, err := db.Exec(ctx, `INSERT INTO corotask.rate_limits (name, rate, per, tokens, refilled_at) VALUES
		('full', 10, interval '1 minute', 10, now()),
		('empty', 1, interval '1 day', 0, now()),
		('refilling', 100, interval '1 minute', 0.5, now() - interval '150 milliseconds'),
		('past', 5, interval '1 second', 1, now() - interval '1 hour'),
		('ahead', 5, interval '1 second', 2, now() + interval '1 hour')`)
	require.NoError(t, err)
	rows, err := db.Query(ctx, `SELECT l.name, corotask.rate_limit_tokens(l, corotask.now()),
		(SELECT r.tokens FROM (`+query.ControlsRateLimits+`) AS r(name, rate, per, tokens, types) WHERE r.name = l.name)
		FROM corotask.rate_limits l`)
	require.NoError(t, err)
	seen := 0
	for rows.Next() {
		var name string
		var theirs, ours float64
		require.NoError(t, rows.Scan(&name, &theirs, &ours))
		require.InDelta(t, theirs, ours, 1e-9, name)
		seen++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 5, seen)
}
