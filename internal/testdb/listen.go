package testdb

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Listen LISTENs on channel on a connection of its own to the database at
// url, closed when the test ends, and returns a function that waits (up to
// Patience) for the next notification and returns its payload.
func Listen(t testing.TB, url, channel string) (next func() string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatalf("listen on %s: %v", channel, err)
	}
	return func() string {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, Patience)
		defer cancel()
		n, err := conn.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no notification on %s: %v", channel, err)
		}
		return n.Payload
	}
}
