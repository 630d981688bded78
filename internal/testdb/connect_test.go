package testdb

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// A server with no connection slot free is tried again until one frees up:
// here a role allowed one connection, which the test holds until connect
// has been refused once.
func TestConnectWaitsForAFreeSlot(t *testing.T) {
	ctx := context.Background()
	admin := AdminURL(t)
	role := "corotask_test_role_" + randomSuffix()
	require.NoError(t, execAdmin(ctx, admin, fmt.Sprintf("CREATE ROLE %s LOGIN CONNECTION LIMIT 1", role)))
	t.Cleanup(func() { _ = execAdmin(context.Background(), admin, "DROP ROLE IF EXISTS "+role) })
	u, err := url.Parse(admin)
	require.NoError(t, err)
	u.User = url.User(role)

	held, err := pgx.Connect(ctx, u.String())
	require.NoError(t, err)
	refusals := make(chan error, 100)
	hear := func(err error) {
		select {
		case refusals <- err:
		default:
		}
	}
	refused.Store(&hear)
	t.Cleanup(func() { refused.Store(nil) })
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, Patience)
		defer cancel()
		conn, err := connect(ctx, u.String())
		if err == nil {
			conn.Close(context.Background())
		}
		got <- err
	}()
	select {
	case err := <-refusals:
		require.ErrorContains(t, err, "SQLSTATE 53300")
	case err := <-got:
		t.Fatalf("connect returned without trying again: %v", err)
	case <-time.After(Patience):
		t.Fatal("connect was not refused")
	}
	require.NoError(t, held.Close(ctx))
	require.NoError(t, <-got)
}
