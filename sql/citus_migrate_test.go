package sql_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
)

// On a Citus cluster (COROTASK_CITUS_URL), Migrate makes the Citus forms of
// the functions again (here, deliver_all's, changed by hand beforehand),
// but leaves those of a newer release as they are: a newer build made its
// own, which an older build's Migrate must not put back.
func TestCitusMigrateKeepsANewerReleasesFunctions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	const fn = "corotask.deliver_all(uuid[], jsonb[], uuid[])"
	mark := func() {
		t.Helper()
		var def string
		require.NoError(t, db.QueryRow(ctx, `SELECT pg_get_functiondef($1::regprocedure)`, fn).Scan(&def))
		def = strings.Replace(def, "BEGIN", "BEGIN\n    -- made by a newer build", 1)
		_, err := db.Exec(ctx, def)
		require.NoError(t, err)
	}
	marked := func() bool {
		t.Helper()
		var src string
		require.NoError(t, db.QueryRow(ctx, `SELECT prosrc FROM pg_proc WHERE oid = $1::regprocedure`, fn).Scan(&src))
		require.Contains(t, src, "t.root_id = ANY (p_roots)", "the Citus form")
		return strings.Contains(src, "made by a newer build")
	}

	mark()
	require.NoError(t, corosql.Migrate(ctx, db))
	require.False(t, marked(), "this build's release: its form made again")

	mark()
	_, err := db.Exec(ctx, `UPDATE corotask.function_files SET release = $1`, corosql.BuildSchema().Functions+1)
	require.NoError(t, err)
	require.NoError(t, corosql.Migrate(ctx, db))
	require.True(t, marked(), "a newer release's form kept")
}
