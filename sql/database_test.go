package sql_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// missingDatabase returns a name no database has, dropped when the test ends
// if the test created it. It is named as the tests' databases are, so that
// one a killed run leaves is swept by a later run, and holds characters that
// must be quoted.
func missingDatabase(t *testing.T, admin string) string {
	t.Helper()
	name := fmt.Sprintf(`corotask_test_%d_%s Ensure"d`, time.Now().Unix(), strings.ToLower(tasks.NewID().String()))
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, admin)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		require.NoError(t, err)
	})
	return name
}

// Callers ensuring the same missing database at once: it is created, and
// exactly one of them says it created it; later calls find it.
func TestEnsureDatabaseOnceAmongConcurrentCallers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.AdminURL(t)
	u := testdb.WithDatabase(t, admin, missingDatabase(t, admin))

	created := make([]bool, 4)
	errs := make([]error, len(created))
	var wg sync.WaitGroup
	for i := range created {
		wg.Go(func() { created[i], errs[i] = corosql.EnsureDatabase(ctx, u) })
	}
	wg.Wait()
	n := 0
	for i, err := range errs {
		require.NoError(t, err)
		if created[i] {
			n++
		}
	}
	require.Equal(t, 1, n, "one caller created it")

	again, err := corosql.EnsureDatabase(ctx, u)
	require.NoError(t, err)
	require.False(t, again, "it exists: nothing to do")
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
}

// A database that exists is left as it is.
func TestEnsureDatabaseExisting(t *testing.T) {
	t.Parallel()
	created, err := corosql.EnsureDatabase(context.Background(), testdb.EmptyURL(t))
	require.NoError(t, err)
	require.False(t, created)
}

// A role that may not create databases is told so, naming the database and
// the role; nothing is created.
func TestEnsureDatabaseRoleMayNotCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.AdminURL(t)
	name := missingDatabase(t, admin)
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	role := "corotask_nocreate_" + strings.ToLower(tasks.NewID().String()[20:])
	const secret = "n0-Createdb"
	_, err = conn.Exec(ctx, "CREATE ROLE "+role+" LOGIN NOCREATEDB PASSWORD '"+secret+"'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })

	u, err := url.Parse(testdb.WithDatabase(t, admin, name))
	require.NoError(t, err)
	u.User = url.UserPassword(role, secret)
	created, err := corosql.EnsureDatabase(ctx, u.String())
	require.ErrorContains(t, err, "database "+name+" does not exist and role "+role+" may not create it")
	require.False(t, created)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists))
	require.False(t, exists)
}

// A connection string that does not parse, or a server that does not
// answer, is an error.
func TestEnsureDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	_, err := corosql.EnsureDatabase(context.Background(), "postgres//x")
	require.Error(t, err)
	_, err = corosql.EnsureDatabase(context.Background(), "postgres://u@127.0.0.1:1/d?connect_timeout=5")
	require.ErrorContains(t, err, "127.0.0.1")
}
