package heartbeat_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/heartbeat"
	"github.com/corotask/corotask/internal/testdb"
)

type renewal struct {
	claims int
	took   time.Duration
	err    error
}

// Config.Renewed hears of the renewals Run makes, failed ones included.
func TestRenewedReportsEachRenewal(t *testing.T) {
	t.Parallel()
	db := &countingDB{DB: testdb.New(t)}
	got := make(chan renewal, 100)
	k := heartbeat.New(db, heartbeat.Config{Timeout: testdb.LongHeartbeat, Interval: 10 * time.Millisecond,
		Renewed: func(_ context.Context, claims int, took time.Duration, err error) {
			select {
			case got <- renewal{claims, took, err}:
			default: // the test has seen enough
			}
		}})
	// All three kept before the first renewal, which renews them together.
	for _, c := range claim(t, db.DB, 3) {
		k.Add(c, time.Now(), func(cause error) {})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	r := <-got
	require.Equal(t, 3, r.claims)
	require.NoError(t, r.err)
	require.Positive(t, r.took)

	db.mu.Lock()
	db.fail = errors.New("database down")
	db.mu.Unlock()
	for r = <-got; r.err == nil; r = <-got {
	}
	require.ErrorContains(t, r.err, "database down")
	require.Equal(t, 3, r.claims)
}
