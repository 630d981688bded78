package testdb

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Claim claims task id as a claim statement would for its attempt, with a
// claim that expires in a minute, and returns the claim token.
func Claim(t testing.TB, db *pgxpool.Pool, id [16]byte, attempt int) [16]byte {
	t.Helper()
	var claim [16]byte
	if err := db.QueryRow(context.Background(), `UPDATE corotask.tasks SET claim = gen_random_uuid(),
		heartbeat = now(), claim_expires_at = now() + interval '1 minute', attempts = $2
		WHERE task_id = $1 RETURNING claim`, id, attempt).Scan(&claim); err != nil {
		t.Fatalf("claim task: %v", err)
	}
	return claim
}
