package inbox_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A message that does not decode into M is delivered in its place, with its
// decode error and raw JSON, between the messages that do.
func TestUndecodableMessageIsDeliveredInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	from := tasks.NewID()
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, 1))
	require.NoError(t, inbox.Send(ctx, db, id, from, "not a number"))
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, 3))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)

	in, err := newInbox[int](id, raw(t, task))
	require.NoError(t, err)
	require.Equal(t, 3, in.Len())
	m, _ := in.Pop()
	require.False(t, m.SentAt.IsZero(), "stamped when sent")
	m.SentAt = time.Time{}
	require.Equal(t, inbox.Message[int]{Body: 1}, m)
	m, _ = in.Pop()
	require.Equal(t, from, m.From, "the envelope is read")
	require.Zero(t, m.Body)
	require.JSONEq(t, `"not a number"`, string(m.Raw))
	var de *inbox.DecodeError
	require.ErrorAs(t, m.DecodeErr, &de)
	require.Equal(t, id, de.Task)
	require.Equal(t, 1, de.Position)
	require.ErrorContains(t, m.DecodeErr, id.String())
	require.ErrorContains(t, m.DecodeErr, "message 1")
	var typeErr *json.UnmarshalTypeError
	require.ErrorAs(t, m.DecodeErr, &typeErr, "the decoder's error is wrapped")
	m, _ = in.Pop()
	m.SentAt = time.Time{}
	require.Equal(t, inbox.Message[int]{Body: 3}, m)

	// A type that fits decodes them all.
	all, err := newInbox[json.RawMessage](id, raw(t, task))
	require.NoError(t, err)
	for all.Len() > 0 {
		m, _ := all.Pop()
		require.NoError(t, m.DecodeErr)
	}
}

// An entry that is not an envelope at all (written by hand in SQL) is
// delivered whole as Raw, with no sender.
func TestMalformedEnvelopeIsDeliveredWhole(t *testing.T) {
	t.Parallel()
	task := tasks.NewID()
	for _, env := range []string{`42`, `"text"`, `[1]`, `{"from": "robert", "body": 1}`, `{"from": 7}`, `{"done": "yes"}`} {
		in, err := newInbox[json.RawMessage](task, [][]byte{[]byte(`{"from": null, "body": 1}`), []byte(env)})
		require.NoError(t, err)
		m, _ := in.Pop()
		require.NoError(t, m.DecodeErr)
		m, _ = in.Pop()
		var de *inbox.DecodeError
		require.ErrorAs(t, m.DecodeErr, &de, env)
		require.Equal(t, 1, de.Position)
		require.True(t, m.From.IsZero())
		require.Equal(t, env, string(m.Raw))
	}
}
