package query_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/internal/testdb"
)

// ClaimControls holds the controls shared for a live executor that asks,
// and only when no type it polls has a key space or a rate limit;
// ClaimControlled notes whether there is room for shares (ClaimNoteRoom:
// the executor asks to share at its next claim only then), and, held
// shared, takes at most a share (an eighth of the maximum) while the other
// claimers' shares still fit, whatever the room when the executor asked.
func TestClaimControlsSharesOnlyForTheClaimLoopFarFromTheMaximum(t *testing.T) {
	t.Parallel()
	db := testdb.Tx(t)
	ctx := context.Background()
	live, stopped := "0190f0e0-0000-7000-8000-000000000001", "0190f0e0-0000-7000-8000-000000000002"
	for _, sql := range []string{
		`INSERT INTO corotask.executors (executor_id, host, pid, version, task_types, concurrency, expires_at, stopped_at) VALUES
			('` + live + `', 'h', 1, 'v', '{a}', 8, now() + interval '1 hour', NULL),
			('` + stopped + `', 'h', 2, 'v', '{a}', 8, now(), now())`,
		`INSERT INTO corotask.key_limits (key_space, max_running) VALUES ('space', 1)`,
		// 16 at most: a share is 2; one live executor.
		`INSERT INTO corotask.type_controls (task_type, max_running, key_space) VALUES ('far', 16, NULL), ('keyed', 16, 'space')`,
	} {
		_, err := db.Exec(ctx, sql)
		require.NoError(t, err)
	}
	// Each claim in a savepoint of its own, rolled back.
	inClaim := func(f func(tx pgx.Tx)) {
		t.Helper()
		tx, err := db.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		f(tx)
	}
	controls := func(tx pgx.Tx, types []string, claimer any, lean bool) string {
		t.Helper()
		var controlled []string
		var locked int64
		var shared string
		require.NoError(t, tx.QueryRow(ctx, query.ClaimControlsFor(lean), types, claimer).Scan(&controlled, &locked, &shared))
		return shared
	}
	mode := func(types []string, claimer any) (shared string) {
		t.Helper()
		inClaim(func(tx pgx.Tx) { shared = controls(tx, types, claimer, false) })
		return shared
	}
	require.Equal(t, "true", mode([]string{"far"}, live), "the claim loop of a live executor asks to share")
	require.Equal(t, "false", mode([]string{"far"}, nil), "PollOnce, the priority lane, or no room noted: exclusive")
	require.Equal(t, "false", mode([]string{"far"}, stopped), "a stopped executor claims exclusive")
	require.Equal(t, "false", mode([]string{"far", "keyed"}, live), "a key space counts per key: exclusive, for every type")

	// claim claims up to 20 tasks of types, with the full form or the
	// lean one, and returns how many it claimed and its notes.
	claim := func(types []string, claimer any, lean bool) (n int, notes int16) {
		t.Helper()
		inClaim(func(tx pgx.Tx) {
			controls(tx, types, claimer, lean)
			rows, err := tx.Query(ctx, query.ClaimControlledFor(false, false, lean), types, 20, []string{}, []int32{}, 30.0,
				types, live, []string{}, []int32{100, 100}, nil, nil, false)
			require.NoError(t, err)
			for rows.Next() {
				vals, err := rows.Values()
				require.NoError(t, err)
				if vals[1] != nil { // a claimed task (the last row has no type)
					n++
					continue
				}
				notes = vals[17].(int16)
			}
			require.NoError(t, rows.Err())
		})
		return n, notes
	}
	// The room noted: 14 running + 1 executor x 2 = 16 still fits; 15 does not.
	run := func(n int) {
		t.Helper()
		_, err := db.Exec(ctx, `INSERT INTO corotask.tasks (task_id, root_id, task_type, claim, heartbeat, claim_expires_at, counted)
			SELECT gen_random_uuid(), gen_random_uuid(), 'far', gen_random_uuid(), now(), now() + interval '1 hour', true FROM generate_series(1, $1)`, n)
		require.NoError(t, err)
	}
	run(14)
	for _, lean := range []bool{false, true} {
		_, notes := claim([]string{"far"}, nil, lean)
		require.Equal(t, int16(query.ClaimNoteRoom), notes, "lean %v", lean)
	}
	run(1)
	for _, lean := range []bool{false, true} {
		_, notes := claim([]string{"far"}, nil, lean)
		require.Zero(t, notes, "15 running: a full share no longer fits (lean %v)", lean)
	}

	// Held shared, ClaimControlled counts the share: with 10 running and
	// 2 live executors, at most min(2, 16 - 10 - 1 x 2) = 2 more.
	_, err := db.Exec(ctx, `DELETE FROM corotask.tasks WHERE task_type = 'far'`)
	require.NoError(t, err)
	run(10)
	_, err = db.Exec(ctx, `INSERT INTO corotask.executors (executor_id, host, pid, version, task_types, concurrency, expires_at)
		VALUES (gen_random_uuid(), 'h', 3, 'v', '{a}', 8, now() + interval '1 hour')`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO corotask.tasks (task_id, root_id, task_type, wake_at)
		SELECT gen_random_uuid(), gen_random_uuid(), typ, now() - interval '1 minute'
		FROM generate_series(1, 20), unnest(ARRAY['far', 'keyed']) AS typ`)
	require.NoError(t, err)
	for _, lean := range []bool{false, true} {
		n, notes := claim([]string{"far"}, live, lean)
		require.Equal(t, 2, n, "held shared: a share (lean %v)", lean)
		require.Equal(t, int16(query.ClaimNoteRoom), notes, "10 + 2 executors x 2 = 14 fits 16 (lean %v)", lean)
		n, _ = claim([]string{"far"}, nil, lean)
		require.Equal(t, 6, n, "held exclusive: all the room there is (lean %v)", lean)
	}
	// Held shared with no room (the executor asked on an older note): no
	// more than fits beside the other claimer's share, min(2, 16 - 13 -
	// 1 x 2) = 1.
	run(3)
	n, notes := claim([]string{"far"}, live, true)
	require.Equal(t, 1, n)
	require.Zero(t, notes)

	// No type with controls: room (nothing to share), and no limit.
	for _, lean := range []bool{false, true} {
		_, notes := claim([]string{"free"}, live, lean)
		require.Equal(t, int16(query.ClaimNoteRoom), notes, "lean %v", lean)
	}

	// A type with a key space: the full form counts it, and notes it; the
	// lean form claims nothing, of any type, and notes it.
	n, notes = claim([]string{"far", "keyed"}, live, false)
	require.Equal(t, 3+16, n, "far's 3 free slots, and keyed's 16 (its tasks have no key: the limit per key holds none)")
	require.Equal(t, int16(query.ClaimNoteLimits), notes)
	n, notes = claim([]string{"far", "keyed"}, live, true)
	require.Zero(t, n)
	require.Equal(t, int16(query.ClaimNoteLimits), notes)
}

// Two claims that hold a type's controls shared run side by side, each in a
// snapshot without the other's claims: each takes a share only while both
// shares fit, so that together they never pass the maximum, even when they
// asked to share on an older note of room. Without room noted, the second
// waits for the first (held exclusive) and counts its claims.
func TestSharedClaimsTogetherStayWithinTheMaximum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type claimCase struct {
		running, want int
		share         bool // the claimers ask to share (their last claims noted room)
		pollOnce      bool // the second claim is PollOnce's (exclusive)
		lean          bool // the lean forms
	}
	var cases []claimCase
	for _, lean := range []bool{false, true} {
		cases = append(cases,
			claimCase{10, 14, true, false, lean},  // 10 + 2 executors x 2 fit 16: shared, a share each
			claimCase{13, 15, true, false, lean},  // asked on an older note: shared, each takes what fits, 16 - 13 - 2 = 1
			claimCase{13, 16, false, false, lean}, // no room noted: exclusive, the first takes 3, the second none
			claimCase{10, 16, true, true, lean},   // the first shared takes 2; PollOnce waits for it, then takes the 4 left
		)
	}
	for _, c := range cases {
		db := testdb.New(t)
		a, b := "0190f0e0-0000-7000-8000-00000000000a", "0190f0e0-0000-7000-8000-00000000000b"
		for _, sql := range []string{
			`INSERT INTO corotask.executors (executor_id, host, pid, version, task_types, concurrency, expires_at) VALUES
				('` + a + `', 'h', 1, 'v', '{far}', 8, now() + interval '1 hour'),
				('` + b + `', 'h', 2, 'v', '{far}', 8, now() + interval '1 hour')`,
			`INSERT INTO corotask.type_controls (task_type, max_running) VALUES ('far', 16)`,
			`INSERT INTO corotask.tasks (task_id, root_id, task_type, claim, heartbeat, claim_expires_at, counted)
				SELECT gen_random_uuid(), gen_random_uuid(), 'far', gen_random_uuid(), now(), now() + interval '1 hour', true
				FROM generate_series(1, ` + strconv.Itoa(c.running) + `)`,
			`INSERT INTO corotask.tasks (task_id, root_id, task_type, wake_at)
				SELECT gen_random_uuid(), gen_random_uuid(), 'far', now() - interval '1 minute' FROM generate_series(1, 20)`,
		} {
			_, err := db.Exec(ctx, sql)
			require.NoError(t, err)
		}
		// claim runs a claim of up to 8 tasks in tx, and returns how it
		// held the controls; it runs in both goroutines, so it returns
		// its error rather than failing the test.
		claim := func(tx pgx.Tx, executor any) (shared string, err error) {
			var controlled []string
			var locked int64
			asks := executor
			if !c.share {
				asks = nil
			}
			if err := tx.QueryRow(ctx, query.ClaimControlsFor(c.lean), []string{"far"}, asks).Scan(&controlled, &locked, &shared); err != nil {
				return "", err
			}
			rows, err := tx.Query(ctx, query.ClaimControlledFor(false, false, c.lean), []string{"far"}, 8, []string{}, []int32{}, 30.0,
				[]string{"far"}, executor, []string{}, []int32{100}, nil, nil, false)
			if err != nil {
				return "", err
			}
			rows.Close()
			return shared, rows.Err()
		}
		first, err := db.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = first.Rollback(ctx) }() // a failed test ends it
		mode, err := claim(first, a)
		require.NoError(t, err)
		firstShared := mode == "true"
		require.Equal(t, c.share, firstShared)
		// The second claim, from another session: held shared, it claims
		// while the first is in flight (neither sees the other's claims);
		// held exclusive, it waits for the first to commit.
		claimed, commit, second := make(chan string, 1), make(chan struct{}), make(chan error, 1)
		release := sync.OnceFunc(func() { close(commit) })
		defer release() // a failed test lets the second session end
		go func() {
			tx, err := db.Begin(ctx)
			if err != nil {
				claimed <- ""
				second <- err
				return
			}
			var claimer any = b
			if c.pollOnce {
				claimer = nil
			}
			mode, err := claim(tx, claimer)
			claimed <- mode
			if err != nil {
				_ = tx.Rollback(ctx)
				second <- err
				return
			}
			<-commit
			second <- tx.Commit(ctx)
		}()
		switch {
		case c.pollOnce:
			// Held exclusive, it waits for the first's shared locks: it
			// has not claimed until the first commits.
			testdb.WaitForLockWait(t, db)
			require.Empty(t, claimed)
			require.NoError(t, first.Commit(ctx))
			require.Equal(t, "false", <-claimed)
		case firstShared:
			require.Equal(t, "true", <-claimed, "the second claims beside the first")
			require.NoError(t, first.Commit(ctx))
		default:
			require.NoError(t, first.Commit(ctx))
			require.Equal(t, "false", <-claimed)
		}
		release()
		require.NoError(t, <-second)
		var running int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE task_type = 'far' AND claim IS NOT NULL AND counted`).Scan(&running))
		require.Equal(t, c.want, running, "%+v", c)
	}
}
