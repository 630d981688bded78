package heartbeat_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/heartbeat"
	"github.com/corotask/corotask/internal/testdb"
)

// A renewal moves the claim's expiry to now plus the keeper's own Timeout:
// the claim carries its holder's timeout, and other executors read it.
func TestRenewalSetsTheClaimsExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	claims := claim(t, db, 2)
	k := heartbeat.New(db, heartbeat.Config{Timeout: 45 * time.Second})
	for _, c := range claims {
		k.Add(c, time.Now(), func(cause error) { t.Errorf("claim %s lost: %v", c.Task, cause) })
	}
	require.NoError(t, k.Renew(ctx))
	var lo, hi float64
	require.NoError(t, db.QueryRow(ctx, `SELECT min(extract(epoch FROM claim_expires_at - heartbeat)),
		max(extract(epoch FROM claim_expires_at - heartbeat)) FROM corotask.tasks`).Scan(&lo, &hi))
	require.InDelta(t, 45, lo, 0.001)
	require.InDelta(t, 45, hi, 0.001)
}
