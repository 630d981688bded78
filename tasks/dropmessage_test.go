package tasks_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// DropMessage with the digest of the message read at a position drops it
// only if it is still there: when a poll took a message meanwhile (the inbox
// moved up), the position holds another message, which is not dropped.
func TestDropMessageExpectingADigestRefusesAnotherMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "t", Message: "first"})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `SELECT corotask.send_to_task($1, NULL, '"poison"'), corotask.send_to_task($1, NULL, '"third"')`, id)
	require.NoError(t, err)

	read, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Len(t, read.Inbox, 3)
	poison := tasks.MessageDigest(read.Inbox[1])
	require.Len(t, poison, 24)
	var sqlDigest string
	require.NoError(t, db.QueryRow(ctx, `SELECT corotask.message_digest(envelope) FROM corotask.messages WHERE task_id = $1 ORDER BY seq OFFSET 1 LIMIT 1`, id).Scan(&sqlDigest))
	require.Equal(t, poison, sqlDigest, "Go and SQL name a message alike")

	// A poll takes the first message: the poison one moves to position 1,
	// and position 2 holds "third".
	testdb.PopFirst(t, db, id)

	_, err = tasks.DropMessage(ctx, db, id, 2, poison)
	require.ErrorIs(t, err, tasks.ErrNoMessage)
	require.ErrorContains(t, err, "the inbox changed since it was read; nothing was dropped")
	after, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, bodies(t, read.Inbox[1:]), bodies(t, after.Inbox), "nothing lost")
	require.Equal(t, read.Attempts, after.Attempts, "no action recorded")

	msg, err := tasks.DropMessage(ctx, db, id, 1, poison)
	require.NoError(t, err)
	require.Equal(t, []string{"poison"}, bodies(t, []json.RawMessage{msg}))
	after, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, []string{"third"}, bodies(t, after.Inbox))

	_, err = tasks.DropMessage(ctx, db, id, 1, "not a digest")
	require.ErrorContains(t, err, "invalid digest")
}

func bodies(t *testing.T, inbox []json.RawMessage) []string {
	t.Helper()
	out := make([]string, 0, len(inbox))
	for _, raw := range inbox {
		var env struct{ Body string }
		require.NoError(t, json.Unmarshal(raw, &env))
		out = append(out, env.Body)
	}
	return out
}

// MessageDigest of an inbox entry as Get returns it is the digest the SQL
// function computes, whatever the protocol the connection reads it with
// (binary, or text as through PgBouncer with the simple protocol), for
// bodies with quotes, escapes and characters beyond ASCII.
func TestMessageDigestMatchesSQLInEveryExecMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "t", Message: map[string]any{
		"q": `a "quoted" \ back\slash {x,y} 'single'`, "u": "é日本 🚀", "n": 1.5e300, "z": nil,
	}})
	require.NoError(t, err)
	var want string
	require.NoError(t, db.QueryRow(ctx, `SELECT corotask.message_digest(envelope) FROM corotask.messages WHERE task_id = $1 ORDER BY seq LIMIT 1`, id).Scan(&want))
	for _, mode := range []pgx.QueryExecMode{
		pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec,
		pgx.QueryExecModeSimpleProtocol,
	} {
		cfg, err := pgx.ParseConfig(url)
		require.NoError(t, err)
		cfg.DefaultQueryExecMode = mode
		conn, err := pgx.ConnectConfig(ctx, cfg)
		require.NoError(t, err)
		if mode != pgx.QueryExecModeSimpleProtocol {
			got, err := tasks.Get(ctx, conn, id)
			require.NoError(t, err, "mode %v", mode)
			require.Equal(t, want, tasks.MessageDigest(got.Inbox[0]), "mode %v", mode)
		}
		// The envelope as text, as the simple protocol returns it.
		var env []byte
		require.NoError(t, conn.QueryRow(ctx, `SELECT envelope FROM corotask.messages WHERE task_id = $1::uuid ORDER BY seq LIMIT 1`,
			id.UUID()).Scan(&env))
		require.Equal(t, want, tasks.MessageDigest(env), "mode %v", mode)
		require.NoError(t, conn.Close(ctx))
	}
}
