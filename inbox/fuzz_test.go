package inbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// Run with: go test ./inbox -run '^$' -fuzz FuzzNew -fuzztime 1m (one fuzz
// target at a time). The seeds below run with every go test.

type point struct {
	X, Y int
	Tag  string `json:",omitempty"`
}

// checkNew decodes raw as an inbox of M: it holds every message, in order;
// each either carries a DecodeError that names the task and its position,
// with its raw JSON, or is the same once encoded again.
func checkNew[M any](t *testing.T, task tasks.ID, raw [][]byte) {
	in, err := newInbox[M](task, raw)
	require.NoError(t, err)
	require.Equal(t, len(raw), in.Len())
	for i := range raw {
		peeked, ok := in.Peek()
		require.True(t, ok)
		m, ok := in.Pop()
		require.True(t, ok)
		require.Equal(t, peeked, m)
		require.Equal(t, len(raw)-i-1, in.Len())
		if m.DecodeErr != nil {
			var de *inbox.DecodeError
			require.True(t, errors.As(m.DecodeErr, &de), "%T: %v", m.DecodeErr, m.DecodeErr)
			require.Equal(t, task, de.Task)
			require.Equal(t, i, de.Position)
			require.Contains(t, m.DecodeErr.Error(), task.String())
			require.NotEmpty(t, m.Raw)
			var zero M
			require.Equal(t, zero, m.Body)
			continue
		}
		require.Nil(t, m.Raw)
		// Re-encoded as an envelope, the message decodes to itself.
		body, err := json.Marshal(m.Body)
		require.NoError(t, err)
		env, err := json.Marshal(envelope.Envelope{From: m.From, Body: body, Done: m.Done, Err: m.Err})
		require.NoError(t, err)
		again, err := newInbox[M](task, [][]byte{env})
		require.NoError(t, err, "%s", env)
		m2, _ := again.Pop()
		require.Equal(t, m, m2)
	}
	_, ok := in.Pop()
	require.False(t, ok)
	require.Zero(t, in.Len())
}

func FuzzNew(f *testing.F) {
	from := tasks.NewID()
	for _, pair := range [][2]string{
		{`{"from":null,"body":1}`, `{"from":"` + from.String() + `","body":{"X":1,"Y":2}}`},
		{`{"from":"` + from.UUID() + `","body":null,"done":true,"err":"canceled"}`, `{"body":"text"}`},
		{`{"from":"robert","body":1}`, `42`},
		{`{}`, `[]`},
		{`{"body":{"X":1e400}}`, `{"body":"\ud800"}`},
		{`{"from":7}`, `{"done":"yes"}`},
		{`not json`, `{"from":null,"body":{"X":"1"}}`},
		{`{"from":null,"body":{"X":1,"X":2}}`, `{"from":null,"body":1,"extra":true}`},
	} {
		f.Add([]byte(pair[0]), []byte(pair[1]))
	}
	task := tasks.NewID()
	f.Fuzz(func(t *testing.T, a, b []byte) {
		raw := [][]byte{a, b}
		checkNew[json.RawMessage](t, task, raw)
		checkNew[int](t, task, raw)
		checkNew[string](t, task, raw)
		checkNew[point](t, task, raw)
		checkNew[map[string]any](t, task, raw)
	})
}

// FuzzSendThenDecode sends arbitrary JSON through PostgreSQL (send_to_task,
// jsonb) and decodes it back: what a poll sees is what was sent, up to jsonb's
// normal form, or the send fails with an error; it never arrives mangled.
func FuzzSendThenDecode(f *testing.F) {
	for _, s := range []string{`1`, `"text"`, `{"a":[1,2,{"b":null}]}`, `"'; DROP TABLE corotask.tasks; --"`,
		`{"from":"spoofed","done":true}`, `"\u0000"`, `"\ud800"`, `1e400`, `-0`, `{"a":1,"a":2}`, `"é\u00e9"`, `[]`, `null`} {
		f.Add([]byte(s))
	}
	ctx := context.Background()
	// A database of its own, not testdb.Tx: under -fuzz one transaction would
	// keep every version of the row it updates, and slow down as it runs.
	db := testdb.New(f)
	to, err := tasks.Create(ctx, db, tasks.Spec{Type: "sink"})
	require.NoError(f, err)
	from := tasks.NewID()
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			require.ErrorContains(t, inbox.Send(ctx, db, to, from, json.RawMessage(body)), "invalid JSON")
			return
		}
		_, err := db.Exec(ctx, `WITH emptied AS (DELETE FROM corotask.messages WHERE task_id = $1)
			UPDATE corotask.tasks SET inbox_len = 0, msg_popped = msg_seq WHERE task_id = $1`, to)
		require.NoError(t, err)
		if err := inbox.Send(ctx, db, to, from, json.RawMessage(body)); err != nil {
			// PostgreSQL refuses some valid JSON (\u0000, numbers out of range):
			// refused as a whole, with nothing stored.
			task, gerr := tasks.Get(ctx, db, to)
			require.NoError(t, gerr)
			require.Zero(t, task.InboxLen, "refused with %v, yet stored", err)
			return
		}
		task, err := tasks.Get(ctx, db, to)
		require.NoError(t, err)
		require.Len(t, task.Inbox, 1)
		raw := [][]byte{task.Inbox[0]}
		in, err := newInbox[json.RawMessage](to, raw)
		require.NoError(t, err)
		m, ok := in.Pop()
		require.True(t, ok)
		require.Equal(t, from, m.From, "the body cannot spoof the envelope")
		require.False(t, m.Done)
		require.True(t, utf8.Valid(m.Body))
		// The same JSON value, as far as Go can tell.
		var sent, got any
		if json.Unmarshal(body, &sent) == nil && !bytes.Contains(body, []byte(`\ud`)) && !bytes.Contains(body, []byte(`\uD`)) {
			if sent == nil {
				require.Empty(t, m.Body, "null is M's zero value")
				return
			}
			require.NoError(t, json.Unmarshal(m.Body, &got))
			require.Equal(t, sent, got, "sent %s, got %s", body, m.Body)
		}
	})
}
