package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A claim reads only the ready tasks of the types it polls: a backlog of a
// type no executor polls costs it nothing, on the generic plan the claim
// runs on, and the claim is not JIT-compiled.
func TestClaimDoesNotReadOtherTypes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	specs := make([]tasks.Spec, 10000)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "other"}
	}
	_, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	_, err = db.Exec(ctx, "VACUUM ANALYZE corotask.tasks")
	require.NoError(t, err)

	for _, stale := range []bool{false, true} {
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, query.ClaimSettings)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, "PREPARE claim("+query.ClaimParams+") AS "+query.Claim)
			require.NoError(t, err)
			defer tx.Exec(ctx, "DEALLOCATE claim") //nolint:errcheck
			var out []byte
			require.NoError(t, tx.QueryRow(ctx, fmt.Sprintf(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
				EXECUTE claim('{mine}', 10, '{}', '{}', 30, '{mine}', gen_random_uuid(), '{}', '{100}', NULL, NULL, %t)`, stale)).Scan(&out))
			var plans []struct {
				Plan map[string]any
				JIT  any
			}
			require.NoError(t, json.Unmarshal(out, &plans))
			require.Len(t, plans, 1)
			hits := plans[0].Plan["Shared Hit Blocks"].(float64) + plans[0].Plan["Shared Read Blocks"].(float64)
			require.Less(t, hits, 30.0, "stale=%v: the claim read %v blocks: %s", stale, hits, out)
			require.Nil(t, plans[0].JIT, "stale=%v: the claim was JIT-compiled", stale)
			return nil
		})
		require.NoError(t, err)
	}
}
