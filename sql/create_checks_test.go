package sql_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// pgCode returns the SQLSTATE of err, and its message.
func pgCode(t *testing.T, err error) (string, string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "a database error: %v", err)
	return pgErr.Code, pgErr.Message
}

// create_task and create_tasks refuse a task that would be its own
// ancestor (CT508, ErrParentCycle): its own parent, or a parent that comes
// later in the same call, which is how two tasks would be each other's
// parents. A parent earlier in the call is fine.
func TestCreateTasksRefusesParentCycles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	a, b, c := tasks.NewID(), tasks.NewID(), tasks.NewID()

	_, err := db.Exec(ctx, `SELECT corotask.create_task($1, 't', $1)`, a)
	code, msg := pgCode(t, err)
	require.Equal(t, "CT508", code)
	require.Contains(t, msg, "cannot be its own parent")
	require.ErrorIs(t, dberr.Translate(err), tasks.ErrParentCycle)
	require.ErrorContains(t, dberr.Translate(err), "task "+a.String()+" cannot be its own parent")

	create := `SELECT corotask.create_tasks($1::uuid[], $2::text[], $3::uuid[], $4::jsonb[], $5::jsonb[], $6::timestamptz[])`
	none := []*string{nil, nil}
	_, err = db.Exec(ctx, create, []tasks.ID{a, b}, []string{"t", "t"}, []*tasks.ID{&b, &a}, none, none, []any{nil, nil})
	code, msg = pgCode(t, err)
	require.Equal(t, "CT508", code)
	require.Contains(t, msg, "would be each other's parents")
	require.ErrorContains(t, dberr.Translate(err),
		"parent cycle: tasks "+a.String()+" and "+b.String()+" would be each other's parents: "+
			"a parent must exist before its child, or come earlier in the same call")

	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "root"})
	require.NoError(t, err)
	_, err = db.Exec(ctx, create, []tasks.ID{a, b}, []string{"t", "t"}, []*tasks.ID{&b, &root}, none, none, []any{nil, nil})
	code, msg = pgCode(t, err)
	require.Equal(t, "CT508", code)
	require.Contains(t, msg, "which comes later in the same call")

	var n int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE task_id IN ($1, $2)`, a, b).Scan(&n))
	require.Zero(t, n, "nothing created")

	_, err = db.Exec(ctx, create, []tasks.ID{b, a, c}, []string{"t", "t", "t"}, []*tasks.ID{&root, &b, &b},
		[]*string{nil, nil, nil}, []*string{nil, nil, nil}, []any{nil, nil, nil})
	require.NoError(t, err)
	var live int
	require.NoError(t, db.QueryRow(ctx, `SELECT live_children FROM corotask.tasks WHERE task_id = $1`, b).Scan(&live))
	require.Equal(t, 2, live)
}

// create_task refuses the task types tasks.Type refuses (22023), among
// them types with control characters that would reach an operator's
// terminal, and its error shows none of them; it accepts the types
// tasks.Type accepts.
func TestCreateTaskEnforcesTypeRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	refused := map[string]string{
		"esc":           "a\x1b]52;c;cGF3bmVk\x07b",
		"csi":           "a\u009b31mb",
		"bidi override": "abc\u202edef",
		"bidi isolate":  "abc\u2066def",
		"zero width":    "ab\u200bc",
		"nbsp":          "a\u00a0b",
		"line sep":      "a\u2028b",
		"bom":           "\ufeffab",
		"private use":   "a\ue000b",
		"tag":           "a\U000e0041b",
		"tab":           "a\tb",
		"newline":       "a\nb",
		"del":           "a\x7fb",
		"soh":           "a\x01b",
		"empty":         "",
		"leading space": " a",
		"trailing":      "a ",
		"too long":      strings.Repeat("x", tasks.MaxTypeLen+1),
		"too long utf8": strings.Repeat("é", tasks.MaxTypeLen/2) + "x",
	}
	for name, typ := range refused {
		require.Error(t, tasks.Type(typ).Validate(), "%s: Go refuses it", name)
		_, err := db.Exec(ctx, `SELECT corotask.create_task($1, $2)`, tasks.NewID(), typ)
		code, msg := pgCode(t, err)
		require.Equal(t, "22023", code, "%s: %v", name, err)
		require.Contains(t, msg, "invalid task type", name)
		for _, r := range msg {
			require.False(t, r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x2028 && r <= 0x202e) || r == 0x2066,
				"%s: the error prints %U: %q", name, r, msg)
		}
	}
	_, err := db.Exec(ctx, `SELECT corotask.create_task($1, $2)`, tasks.NewID(), "a\x1bb")
	_, msg := pgCode(t, err)
	require.Contains(t, msg, `invalid task type "a?b"`)
	require.Contains(t, msg, "unprintable character U+001B at character 2")

	// Among other types of the same call, each checked whatever comes
	// around it.
	for _, typs := range [][]string{
		{"ok", "a\x01b"}, {"a\x01", "b"}, {"ok", ""}, {"", "ok"}, {"ok", " x"}, {"x ", "ok"},
		{"ok", strings.Repeat("x", tasks.MaxTypeLen+1)}, {"ok", "ok", "a\x1bb"}, {"é", "a\u202eb"},
	} {
		ids := make([]tasks.ID, len(typs))
		for i := range ids {
			ids[i] = tasks.NewID()
		}
		nulls := make([]*string, len(typs))
		_, err := db.Exec(ctx, `SELECT corotask.create_tasks($1::uuid[], $2::text[], $3::uuid[], $4::jsonb[], $5::jsonb[], $6::timestamptz[])`,
			ids, typs, make([]*tasks.ID, len(typs)), nulls, nulls, make([]any, len(typs)))
		code, _ := pgCode(t, err)
		require.Equal(t, "22023", code, "%q", typs)
	}

	accepted := []string{
		"orders.checkout", "a b", "é日本語-ok_1", "🚀 launch", "Ωmega/x:y",
		strings.Repeat("x", tasks.MaxTypeLen), strings.Repeat("é", tasks.MaxTypeLen/2),
	}
	for _, typ := range accepted {
		require.NoError(t, tasks.Type(typ).Validate(), typ)
		_, err := db.Exec(ctx, `SELECT corotask.create_task($1, $2)`, tasks.NewID(), typ)
		require.NoError(t, err, typ)
	}
	_, err = db.Exec(ctx, `SELECT corotask.create_tasks($1::uuid[], $2::text[], $3::uuid[], $4::jsonb[], $5::jsonb[], $6::timestamptz[])`,
		[]tasks.ID{tasks.NewID(), tasks.NewID(), tasks.NewID()}, []string{"a b", "x|y", "é"},
		make([]*tasks.ID, 3), make([]*string, 3), make([]*string, 3), make([]any, 3))
	require.NoError(t, err)
}
