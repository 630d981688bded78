package testdb

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

// PopFirst removes the oldest message of an idle task's inbox as a
// committed poll that popped it would: tests use it to move an inbox under
// an operator's feet.
func PopFirst(t testing.TB, db tasks.DB, id tasks.ID) {
	t.Helper()
	tag, err := db.Exec(context.Background(), `WITH first AS (
			DELETE FROM corotask.messages WHERE task_id = $1
			  AND seq = (SELECT min(seq) FROM corotask.messages WHERE task_id = $1)
			RETURNING seq
		)
		UPDATE corotask.tasks SET inbox_len = inbox_len - 1, msg_popped = first.seq
		FROM first WHERE task_id = $1`, id)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "task %s has no message to pop", id)
}

// AppendRaw stores envelope, as given, as the newest message of an idle
// task's inbox, with none of send_to_task's checks: tests use it to put in
// an inbox what no sender would (an envelope that is not one).
func AppendRaw(t testing.TB, db tasks.DB, id tasks.ID, envelope string) {
	t.Helper()
	tag, err := db.Exec(context.Background(), `WITH appended AS (
			UPDATE corotask.tasks SET msg_seq = msg_seq + 1, inbox_len = inbox_len + 1
			WHERE task_id = $1 RETURNING msg_seq, root_id
		)
		INSERT INTO corotask.messages (task_id, root_id, seq, envelope) SELECT $1, root_id, msg_seq, $2::jsonb FROM appended`, id, envelope)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "task %s not found", id)
}
