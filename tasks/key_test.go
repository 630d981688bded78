package tasks_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestCreateWithKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)

	first, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order-42", State: map[string]int{"n": 1}})
	require.NoError(t, err)
	got, err := tasks.Get(ctx, db, first)
	require.NoError(t, err)
	require.Equal(t, "order-42", got.Key)

	byKey, err := tasks.GetByKey(ctx, db, "order", "order-42")
	require.NoError(t, err)
	require.Equal(t, first, byKey.ID)
	require.Equal(t, "order-42", byKey.Key)
	require.JSONEq(t, `{"n":1}`, string(byKey.State))

	// A second live task of the type with the key is refused, naming the first.
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order-42"})
	require.ErrorIs(t, err, tasks.ErrExists)
	var exists *tasks.ExistsError
	require.True(t, errors.As(err, &exists), "%v", err)
	require.Equal(t, first, exists.ID)
	require.ErrorContains(t, err, first.String())
	require.ErrorContains(t, err, `"order-42"`)

	// Another type, or no key, is no conflict.
	other, err := tasks.Create(ctx, db, tasks.Spec{Type: "invoice", Key: "order-42"})
	require.NoError(t, err)
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "order"})
	require.NoError(t, err)
	byKey, err = tasks.GetByKey(ctx, db, "invoice", "order-42")
	require.NoError(t, err)
	require.Equal(t, other, byKey.ID)

	// Once the task has ended, its key is free again.
	err = tasks.Cancel(ctx, db, first)
	require.NoError(t, err)
	_, err = tasks.GetByKey(ctx, db, "order", "order-42")
	require.ErrorIs(t, err, tasks.ErrNotFound)
	require.ErrorContains(t, err, `"order-42"`)
	second, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "order-42"})
	require.NoError(t, err)
	byKey, err = tasks.GetByKey(ctx, db, "order", "order-42")
	require.NoError(t, err)
	require.Equal(t, second, byKey.ID)

	// The ended task keeps its key: List finds both.
	list, err := tasks.List(ctx, db, tasks.Filter{Key: "order-42", Type: "order"})
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, first, list[0].ID)
	require.Equal(t, second, list[1].ID)
}

// CreateMany refuses a key twice in one call, naming the earlier task, and
// creates none of its tasks.
func TestCreateManyRefusesRepeatedKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	a, b := tasks.NewID(), tasks.NewID()
	_, err := tasks.CreateMany(ctx, db, []tasks.Spec{
		{ID: a, Type: "order", Key: "k"}, {Type: "order"}, {ID: b, Type: "order", Key: "k"},
	})
	require.ErrorIs(t, err, tasks.ErrExists)
	var exists *tasks.ExistsError
	require.ErrorAs(t, err, &exists)
	require.Equal(t, a, exists.ID)
	list, err := tasks.List(ctx, db, tasks.Filter{})
	require.NoError(t, err)
	require.Empty(t, list)
}

// A taken ID is an *ExistsError too, naming it.
func TestCreateTakenIDNamesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "order"})
	require.NoError(t, err)
	_, err = tasks.Create(ctx, db, tasks.Spec{ID: id, Type: "order", Key: "k"})
	var exists *tasks.ExistsError
	require.ErrorAs(t, err, &exists)
	require.Equal(t, id, exists.ID)
}

func TestInvalidKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	for key, want := range map[string]string{
		strings.Repeat("k", tasks.MaxKeyLen+1): "201 bytes, at most 200",
		"a\nb":                                 `invalid task key "a\nb": control character U+000A at byte 1`,
		"tab\there":                            "control character U+0009",
		"c1\u0085":                             "control character U+0085",
		"bad\xff":                              "not UTF-8",
	} {
		require.ErrorContains(t, tasks.ValidateKey(key), want, "%q", key)
		_, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: key})
		require.ErrorContains(t, err, want, "%q", key)
		_, err = tasks.GetByKey(ctx, db, "order", key)
		require.ErrorContains(t, err, want, "%q", key)
	}
	require.ErrorContains(t, tasks.ValidateKey(""), "empty")
	_, err := tasks.GetByKey(ctx, db, "order", "")
	require.ErrorContains(t, err, "invalid task key: empty")
	for _, ok := range []string{"k", strings.Repeat("é", tasks.MaxKeyLen/2), " spaced key ", "user@example.com", "日本"} {
		require.NoError(t, tasks.ValidateKey(ok), "%q", ok)
		_, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: ok})
		require.NoError(t, err, "%q", ok)
	}
}

// The database refuses what ValidateKey refuses, whoever writes the key,
// with a message that names the task and the problem.
func TestDatabaseRefusesInvalidKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id := tasks.NewID()
	for key, want := range map[string]string{
		"":                       "invalid task key of task " + id.UUID() + ": empty",
		strings.Repeat("x", 201): "201 bytes, at most 200",
		"a\x01b":                 `invalid task key "a?b" of task ` + id.UUID() + `: control character U+0001 at character 2`,
		"a\u009fb":               "control character U+009F",
	} {
		_, err := db.Exec(ctx, `SELECT corotask.create_tasks(ARRAY[$1::uuid], ARRAY['order'], ARRAY[NULL::uuid],
			ARRAY[NULL::jsonb], ARRAY[NULL::jsonb], ARRAY[NULL::timestamptz], NULL::jsonb[], ARRAY[$2::text])`, id, key)
		require.ErrorContains(t, err, want, "%q", key)
		_, err = db.Exec(ctx, `INSERT INTO corotask.tasks (task_id, root_id, task_type, task_key) VALUES ($1, $1, 'order', $2)`, id, key)
		require.ErrorContains(t, err, "tasks_key_valid", "%q", key)
	}
}

// A failed task whose key another live task took meanwhile cannot be
// restarted: two live tasks of a type never share a key.
func TestRestartRefusedWhenTheKeyIsTaken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	failed, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "k"})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET outcome = 'failed', done_at = now(), wake_at = NULL,
		failures = 3, last_error = 'boom' WHERE task_id = $1`, failed)
	require.NoError(t, err)
	holder, err := tasks.Create(ctx, db, tasks.Spec{Type: "order", Key: "k"})
	require.NoError(t, err)
	err = tasks.Restart(ctx, db, failed)
	require.ErrorIs(t, err, tasks.ErrExists)
	var exists *tasks.ExistsError
	require.ErrorAs(t, err, &exists)
	require.Equal(t, holder, exists.ID, "the refusal names the live task that holds the key")
	require.NoError(t, tasks.Cancel(ctx, db, holder))
	require.NoError(t, tasks.Restart(ctx, db, failed))
	got, err := tasks.GetByKey(ctx, db, "order", "k")
	require.NoError(t, err)
	require.Equal(t, failed, got.ID)
}

// A create retried with the same ID and key is refused as the same ID would
// be without a key, and counts nothing twice.
func TestCreateRetriedWithKeyIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "order"})
	require.NoError(t, err)
	spec := tasks.Spec{ID: tasks.NewID(), Type: "order.step", Parent: parent, Key: "charge", Message: "go"}
	_, err = tasks.Create(ctx, db, spec)
	require.NoError(t, err)

	_, err = tasks.Create(ctx, db, spec)
	var exists *tasks.ExistsError
	require.ErrorAs(t, err, &exists)
	require.Equal(t, spec.ID, exists.ID)
	p, err := tasks.Get(ctx, db, parent)
	require.NoError(t, err)
	require.Equal(t, 1, p.LiveChildren, "the child is counted once")
	child, err := tasks.Get(ctx, db, spec.ID)
	require.NoError(t, err)
	require.Equal(t, 1, child.InboxLen, "its first message once")
}
