package dberr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestTranslateExists(t *testing.T) {
	t.Parallel()
	const uuid = "0190d0a8-6c52-7e3a-9b1f-2f4c6a8e0b11"
	const ulid = "01J38AGV2JFRX9P7SF9HN8W2RH"
	for _, c := range []struct {
		name string
		pg   *pgconn.PgError
		text string
		id   bool
	}{
		{"taken ID", &pgconn.PgError{Code: "23505", ConstraintName: "tasks_pkey",
			Detail: "Key (task_id)=(" + uuid + ") already exists."}, "task already exists: " + ulid, true},
		{"key refused by corotask", &pgconn.PgError{Code: "23505", ConstraintName: "tasks_live_key",
			Message: `corotask: a live task of type "t" has key "k" already: task ` + uuid, Detail: "task " + uuid},
			`task already exists: a live task of type "t" has key "k" already: task ` + ulid, true},
		{"a key that looks like a UUID is shown as it is", &pgconn.PgError{Code: "23505", ConstraintName: "tasks_live_key",
			Message: `corotask: a live task of type "t" has key "` + uuid + `" already: task ` + uuid, Detail: "task " + uuid},
			`task already exists: a live task of type "t" has key "` + uuid + `" already: task ` + ulid, true},
		{"key refused by the index", &pgconn.PgError{Code: "23505", ConstraintName: "tasks_live_key",
			Message: `duplicate key value violates unique constraint "tasks_live_key"`,
			Detail:  "Key (task_type, task_key)=(t, k) already exists."},
			`task already exists: duplicate key value violates unique constraint "tasks_live_key": Key (task_type, task_key)=(t, k) already exists.`, false},
	} {
		err := Translate(fmt.Errorf("commit: %w", c.pg))
		require.ErrorIs(t, err, Exists, c.name)
		require.Equal(t, c.text, err.Error(), c.name)
		var pg *pgconn.PgError
		require.True(t, errors.As(err, &pg), c.name)
		id, ok := ExistingTask(err)
		require.Equal(t, c.id, ok, c.name)
		if ok {
			require.Equal(t, "0190d0a86c527e3a9b1f2f4c6a8e0b11", fmt.Sprintf("%x", id[:]), c.name)
		}
	}
	_, ok := ExistingTask(errors.New("other"))
	require.False(t, ok)
}
