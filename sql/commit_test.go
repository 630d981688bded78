package sql_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A spawn with a claim token, committed with an executor, is created claimed
// by that executor as a claim would leave it; one without, or a commit
// without an executor, creates the child ready.
func TestCommitPollsCreatesClaimedChildren(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "p"})
	require.NoError(t, err)
	claim := testdb.Claim(t, db, parent, 1)
	eager, ready := tasks.NewID(), tasks.NewID()
	executorID, token := tasks.NewID(), tasks.NewID()
	require.NoError(t, commitSpawns(t, db, parent, claim, []map[string]any{
		{"id": eager.UUID(), "type": "c", "state": 1, "claim": token.UUID()},
		{"id": ready.UUID(), "type": "c", "state": 2},
	}, executorID.UUID(), 30.0))

	c, err := tasks.Get(ctx, db, eager)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRunning, c.Status)
	require.Equal(t, executorID, c.ClaimedBy)
	require.NotNil(t, c.ClaimedAt)
	require.Equal(t, 1, c.Attempts, "its first attempt, as a claim counts it")
	var expiresIn float64
	var gotToken string
	require.NoError(t, db.QueryRow(ctx, `SELECT extract(epoch FROM claim_expires_at - heartbeat), claim::text
		FROM corotask.tasks WHERE task_id = $1`, eager).Scan(&expiresIn, &gotToken))
	require.InDelta(t, 30, expiresIn, 0.001)
	require.Equal(t, token.UUID(), gotToken)

	r, err := tasks.Get(ctx, db, ready)
	require.NoError(t, err)
	require.Contains(t, []tasks.Status{tasks.StatusReady, tasks.StatusUnserved}, r.Status, "no claim token: created ready")
	require.Zero(t, r.Attempts)
	require.True(t, r.ClaimedBy.IsZero())

	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Equal(t, 2, p.LiveChildren)

	// Without an executor, a token is ignored.
	claim = testdb.Claim(t, db, parent, 2)
	other := tasks.NewID()
	require.NoError(t, commitSpawns(t, db, parent, claim, []map[string]any{{"id": other.UUID(), "type": "c", "claim": token.UUID()}}))
	o, err := tasks.Get(ctx, db, other)
	require.NoError(t, err)
	require.Contains(t, []tasks.Status{tasks.StatusReady, tasks.StatusUnserved}, o.Status)
	require.Zero(t, o.Attempts)
}

// Children claimed by an executor need a claim that expires: a commit
// without a positive duration is refused, and changes nothing.
func TestCommitPollsRefusesAClaimWithoutExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "p"})
	require.NoError(t, err)
	claim := testdb.Claim(t, db, parent, 1)
	child := tasks.NewID()
	spawns := []map[string]any{{"id": child.UUID(), "type": "c", "claim": tasks.NewID().UUID()}}
	for _, secs := range []any{nil, 0.0, -1.0} {
		err := commitSpawns(t, db, parent, claim, spawns, tasks.NewID().UUID(), secs)
		require.ErrorContains(t, err, "positive claim duration", "%v", secs)
	}
	_, err = tasks.Get(ctx, db, child)
	require.ErrorIs(t, err, tasks.ErrNotFound)
	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusRunning, p.Status, "still claimed, as before the commit")
}

// commitSpawns commits a poll of parent, which holds claim, that spawns
// spawns and awaits them, and checks that the poll was kept. Given an
// executor and a claim duration (claimedBy), the children with a "claim"
// token are created claimed; else every child is created ready.
func commitSpawns(t *testing.T, db *pgxpool.Pool, parent tasks.ID, claim [16]byte, spawns []map[string]any, claimedBy ...any) error {
	t.Helper()
	effects, err := json.Marshal(map[string]any{"spawn": spawns})
	require.NoError(t, err)
	call := `corotask.commit_polls(
		ARRAY[$1::uuid], ARRAY[$2::uuid], ARRAY['null'::jsonb], ARRAY[0], ARRAY['await'], ARRAY[0::float8],
		ARRAY[NULL::timestamptz], ARRAY[NULL::jsonb], ARRAY[$3::jsonb], ARRAY[1::smallint], 20, 100, ARRAY[NULL::uuid]`
	args := []any{parent, claim, effects}
	if len(claimedBy) == 0 {
		claimedBy = []any{nil, nil}
	}
	call += `, $4::uuid, $5::float8, ARRAY[NULL::bigint], ARRAY[NULL::bigint]`
	args = append(args, claimedBy...)
	var polled tasks.ID
	if err := db.QueryRow(context.Background(), `SELECT polled FROM `+call+`)`, args...).Scan(&polled); err != nil {
		return err
	}
	require.Equal(t, parent, polled)
	return nil
}
