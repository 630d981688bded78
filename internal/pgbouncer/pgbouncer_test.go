package pgbouncer_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/pgbouncer"
	"github.com/corotask/corotask/internal/testdb"
)

// TestTransactionPooling checks that Start puts a PgBouncer in transaction
// mode in front of the database: two client connections, each between
// transactions, share the one server connection of a pool of one.
func TestTransactionPooling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := testdb.URL(t)
	through := pgbouncer.Start(t, direct, pgbouncer.Options{PoolSize: 1})

	pids := make([]int32, 2)
	names := make([]string, 2)
	for i := range pids {
		conn, err := pgx.Connect(ctx, through)
		require.NoError(t, err)
		defer conn.Close(ctx)
		require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid(), current_database()",
			pgx.QueryExecModeSimpleProtocol).Scan(&pids[i], &names[i]))
	}
	require.Equal(t, pids[0], pids[1], "two clients, one server connection")

	conn, err := pgx.Connect(ctx, direct)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var want string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&want))
	require.Equal(t, []string{want, want}, names)
}
