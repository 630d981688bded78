package testdb

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier is what WaitForLockWait reads through: a pool, a connection or a
// tasks.DB.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// WaitForLockWait waits, up to Patience, until a session of db's database
// waits for a lock: the statement a test started in another session has
// reached the lock the test holds. It fails the test otherwise.
func WaitForLockWait(t testing.TB, db Querier) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(Patience)
	for {
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatalf("wait for a lock wait: %v", err)
		}
		if n > 0 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("no session waited for a lock within %s", Patience)
		}
	}
}
