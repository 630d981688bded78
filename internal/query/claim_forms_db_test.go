package query_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/internal/testdb"
)

// Each smaller form of ClaimFor (ClaimControlledFor, lean or not) claims
// what Claim (ClaimControlled) claims with the same arguments, and its last row
// carries the same next wake_at and floors (none without $10); a form
// without the search of expired claims carries no stale floor (NULL), where
// Claim carries the floor margin before its now().
func TestClaimForClaimsWhatClaimClaims(t *testing.T) {
	t.Parallel()
	db := testdb.Tx(t)
	ctx := context.Background()
	_, err := db.Exec(ctx, `INSERT INTO corotask.tasks (task_id, root_id, task_type, wake_at)
		SELECT u, u, typ, now() - make_interval(secs => i) FROM (
			SELECT gen_random_uuid() AS u, i, CASE WHEN i % 3 = 0 THEN 'b' ELSE 'a' END AS typ FROM generate_series(1, 9) i) s`)
	require.NoError(t, err)
	// A claim of another executor that expired, and a task due later.
	_, err = db.Exec(ctx, `INSERT INTO corotask.tasks (task_id, root_id, task_type, wake_at, claim, claimed_by, heartbeat, claim_expires_at)
		SELECT u, u, 'a', now() - interval '1 hour', gen_random_uuid(), gen_random_uuid(), now(), now() - interval '1 minute'
		FROM (SELECT gen_random_uuid() AS u) s`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO corotask.tasks (task_id, root_id, task_type, wake_at) SELECT u, u, 'a', now() + interval '1 hour' FROM (SELECT gen_random_uuid() AS u) s`)
	require.NoError(t, err)

	type outcome struct {
		ids         []string
		next        *time.Time
		staleFloor  *time.Time
		floorsValid bool
		notes       any // the last row's last column
	}
	controlled := false // ClaimControls first, in each claim's transaction
	lean := false       // ClaimControlsFor(true) before a lean form
	claim := func(stmt string, open []string, stale, withFloors, leanForm bool) (o outcome) {
		t.Helper()
		tx, err := db.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		_, err = tx.Exec(ctx, query.ClaimSettings)
		require.NoError(t, err)
		all := []string{"a", "b"}
		if controlled {
			var types []string
			var locked int64
			var shared string
			require.NoError(t, tx.QueryRow(ctx, query.ClaimControlsFor(leanForm), all, nil).Scan(&types, &locked, &shared))
			require.Equal(t, []string{"a"}, types)
		}
		var floors []time.Time
		if withFloors {
			floors = []time.Time{time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)}
		}
		rows, err := tx.Query(ctx, stmt, open, 5, []string{}, []int32{}, 30.0, all,
			"0190f0e0-0000-7000-8000-00000000000a", []string{}, []int32{100, 100}, floors, time.Now().Add(-time.Hour), stale)
		require.NoError(t, err)
		for rows.Next() {
			v, err := rows.Values()
			require.NoError(t, err)
			if v[0] != nil {
				id := v[0].([16]byte)
				o.ids = append(o.ids, string(id[:]))
				continue
			}
			if v[12] != nil {
				next := v[12].(time.Time)
				o.next = &next
			}
			o.floorsValid = v[14] != nil
			o.notes = v[17]
			if v[15] != nil {
				floor := v[15].(time.Time)
				o.staleFloor = &floor
			}
		}
		require.NoError(t, rows.Err())
		slices.Sort(o.ids)
		return o
	}
	// same compares a form's claim with the largest form's, on the same
	// arguments.
	same := func(largest, form string, open []string, stale, floors bool) {
		t.Helper()
		want := claim(largest, open, stale, floors, false)
		got := claim(form, open, stale, floors, lean)
		what := fmt.Sprintf("%v, stale %v, floors %v, controlled %v, lean %v", open, stale, floors, controlled, lean)
		require.Len(t, got.ids, 5, what)
		require.Equal(t, want.ids, got.ids, what)
		require.Equal(t, want.next, got.next, what)
		require.Equal(t, want.notes, got.notes, what)
		require.Equal(t, floors, got.floorsValid, what)
		require.Equal(t, want.floorsValid, got.floorsValid, what)
		if stale {
			require.Equal(t, want.staleFloor, got.staleFloor, what)
		} else {
			require.NotNil(t, want.staleFloor, what)
			require.Nil(t, got.staleFloor, "no search, no stale floor: %s", what)
		}
	}
	for _, stale := range []bool{false, true} {
		for _, floors := range []bool{false, true} {
			for _, open := range [][]string{{"a"}, {"a", "b"}} {
				same(query.Claim, query.ClaimFor(len(open) == 1, stale, floors), open, stale, floors)
			}
		}
	}

	// ClaimControlledFor's forms, full and lean, for types with controls
	// (a maximum that does not bind).
	_, err = db.Exec(ctx, `INSERT INTO corotask.type_controls (task_type, max_running) VALUES ('a', 100)`)
	require.NoError(t, err)
	controlled = true
	for _, lean = range []bool{false, true} {
		for _, stale := range []bool{false, true} {
			for _, floors := range []bool{false, true} {
				same(query.ClaimControlled, query.ClaimControlledFor(stale, floors, lean), []string{"a", "b"}, stale, floors)
			}
		}
	}
}
