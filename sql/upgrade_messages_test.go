package sql_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// installMigrations sets db up as a build whose last migration is version
// last left it: the bookkeeping tables and the migrations up to it, recorded.
// The function files of that build are not at hand (they are replaced by the
// current ones as soon as a migration is applied); the database holds the
// functions the migrations themselves made, and function_files records an
// older release of every current file, so that Migrate must apply them all.
func installMigrations(t *testing.T, db *pgxpool.Pool, last int) {
	t.Helper()
	ctx := context.Background()
	all, err := corosql.Migrations()
	require.NoError(t, err)
	require.Less(t, last, len(all), "a migration after version %d to upgrade with", last)
	_, err = db.Exec(ctx, `CREATE SCHEMA corotask;
		CREATE TABLE corotask.migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now(),
			checksum   text
		);
		CREATE TABLE corotask.function_files (
			name       text        PRIMARY KEY,
			checksum   text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`)
	require.NoError(t, err)
	for _, m := range all[:last] {
		_, err = db.Exec(ctx, m.SQL)
		require.NoError(t, err, "apply %s", m.Name)
		_, err = db.Exec(ctx, `INSERT INTO corotask.migrations (version, name, checksum) VALUES ($1, $2, $3)`,
			m.Version, m.Name, m.Checksum())
		require.NoError(t, err)
	}
	require.Equal(t, last, all[last-1].Version)
	functions, err := corosql.FunctionFiles()
	require.NoError(t, err)
	for _, f := range functions {
		_, err = db.Exec(ctx, `INSERT INTO corotask.function_files (name, checksum) VALUES ($1, 'an older release')`, f.Name)
		require.NoError(t, err)
	}
}

// oldTask is a task as the schema of migration 8 stores it, messages in its
// jsonb[] columns.
type oldTask struct {
	id         tasks.ID
	inbox      []string // envelopes, as JSON
	inboxNext  []string
	claim      string // "": not running; "live": a claim an hour from expiry; "expired": one that expired an hour ago
	suspended  bool
	ended      bool
	wantWakes  bool // next_wakes after the upgrade
	wantStatus tasks.Status
}

// seenMessage is what a poll is shown of one message.
type seenMessage struct {
	From tasks.ID
	Body string // the body's JSON; "" for none (null)
	Done bool
	Err  string
}

// seenOf is how a poll should be shown the stored envelope env.
func seenOf(t *testing.T, env []byte) seenMessage {
	t.Helper()
	var e struct {
		From tasks.ID        `json:"from"`
		Body json.RawMessage `json:"body"`
		Done bool            `json:"done"`
		Err  string          `json:"err"`
	}
	require.NoError(t, json.Unmarshal(env, &e))
	s := seenMessage{From: e.From, Body: string(e.Body), Done: e.Done, Err: e.Err}
	if s.Body == "null" {
		s.Body = ""
	}
	return s
}

// rawMessages returns msgs as Get returns them: nil when there are none.
func rawMessages(msgs [][]byte) []json.RawMessage {
	var out []json.RawMessage
	for _, m := range msgs {
		out = append(out, m)
	}
	return out
}

// A database at migration 8 whose tasks hold messages in their inbox and
// inbox_next columns (live, suspended, running with a valid claim, running
// with an expired one, ended, and one with none) upgrades to messages as
// rows: every message is moved, in order, with its counters and the
// privileges on it; then every task is polled once, shown each of its
// messages once and in order, the inbox before inbox_next.
func TestUpgradeMovesInboxesToMessageRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Pool(t, testdb.EmptyURL(t))
	installMigrations(t, db, 8)

	sender, child1, child2, child3, canceled := tasks.NewID(), tasks.NewID(), tasks.NewID(), tasks.NewID(), tasks.NewID()
	const at = `"at": "2026-11-20T10:00:00.123456+00:00"`
	env := func(from *tasks.ID, body string, extra ...string) string {
		f := "null"
		if from != nil {
			f = `"` + from.UUID() + `"` // as the old SQL wrote it (jsonb of a uuid)
		}
		return `{"from": ` + f + `, "body": ` + body + `, ` + strings.Join(append(extra, at), ", ") + `}`
	}
	const trace = `"trace": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "vendor=x"}`
	ready := oldTask{id: tasks.NewID(), wantStatus: tasks.StatusReady, inbox: []string{
		env(nil, `"ready 1"`),
		env(&sender, `{"n": 2, "tags": ["a", "b"], "nested": {"z": null, "é": "ünïcode"}}`, trace),
		env(nil, `3.25`),
		env(&sender, `["ready", 4]`),
		env(nil, `null`),
	}}
	suspended := oldTask{id: tasks.NewID(), suspended: true, wantStatus: tasks.StatusSuspended, inbox: []string{
		env(&sender, `"left by the last poll"`),
	}}
	running := oldTask{id: tasks.NewID(), claim: "live", wantWakes: true, wantStatus: tasks.StatusRunning,
		inbox: []string{env(nil, `"running 1"`), env(&sender, `"running 2"`, trace)},
		inboxNext: []string{
			env(&child1, `"an earlier child's result"`, `"done": true`),
			env(nil, `"running 3, sent during the poll"`),
			env(&child2, `"result"`, `"done": true`),
		}}
	resultOnly := oldTask{id: tasks.NewID(), claim: "live", wantStatus: tasks.StatusRunning,
		inbox:     []string{env(nil, `"resultOnly 1"`)},
		inboxNext: []string{env(&child3, `{"result": [1, 2, 3]}`, `"done": true`)},
	}
	failedChild := oldTask{id: tasks.NewID(), claim: "live", wantWakes: true, wantStatus: tasks.StatusRunning,
		inboxNext: []string{env(&canceled, `null`, `"done": true`, `"err": "canceled"`)},
	}
	dead := oldTask{id: tasks.NewID(), claim: "expired", wantWakes: true, wantStatus: tasks.StatusStale,
		inbox:     []string{env(nil, `"dead 1"`), env(&sender, `"dead 2"`)},
		inboxNext: []string{env(nil, `"dead 3, sent after its executor died"`, trace)},
	}
	ended := oldTask{id: tasks.NewID(), ended: true, wantStatus: tasks.StatusDone,
		inbox: []string{env(nil, `"too late 1"`), env(nil, `"too late 2"`)},
	}
	empty := oldTask{id: tasks.NewID(), wantStatus: tasks.StatusReady}
	all := []oldTask{ready, suspended, running, resultOnly, failedChild, dead, ended, empty}
	for _, o := range all {
		_, err := db.Exec(ctx, `INSERT INTO corotask.tasks (task_id, task_type, wake_at, inbox, inbox_next,
				claim, heartbeat, claim_expires_at, attempts, claimed_at, done_at, outcome)
			SELECT $1, 'job', CASE WHEN $4 OR $6 THEN NULL ELSE now() END, $2::text[]::jsonb[], $3::text[]::jsonb[],
				CASE WHEN $5 <> '' THEN gen_random_uuid() END,
				CASE WHEN $5 <> '' THEN now() END,
				CASE $5 WHEN 'live' THEN now() + interval '1 hour' WHEN 'expired' THEN now() - interval '1 hour' END,
				CASE WHEN $5 <> '' THEN 1 ELSE 0 END,
				CASE WHEN $5 <> '' THEN now() END,
				CASE WHEN $6 THEN now() END, CASE WHEN $6 THEN 'done' END`,
			o.id, append([]string{}, o.inbox...), append([]string{}, o.inboxNext...), o.suspended, o.claim, o.ended)
		require.NoError(t, err)
	}

	// Roles that read, or read and write, the tasks: grants made by hand.
	suffix := strings.ToLower(tasks.NewID().String()[16:])
	reader, writer := "corotask_reader_"+suffix, "corotask_writer_"+suffix
	_, err := db.Exec(ctx, `CREATE ROLE `+reader+` NOLOGIN; CREATE ROLE `+writer+` NOLOGIN;
		GRANT SELECT ON corotask.tasks TO `+reader+`;
		GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON corotask.tasks TO `+writer+`;
		GRANT SELECT ON corotask.tasks TO PUBLIC`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), "DROP OWNED BY "+reader+", "+writer+"; DROP ROLE "+reader+", "+writer)
	})

	// The messages as the old columns hold them, read back as stored.
	before := map[tasks.ID][2][][]byte{}
	rows, err := db.Query(ctx, `SELECT task_id, inbox, inbox_next FROM corotask.tasks`)
	require.NoError(t, err)
	var id tasks.ID
	var in, next [][]byte
	_, err = pgx.ForEachRow(rows, []any{&id, &in, &next}, func() error {
		before[id] = [2][][]byte{in, next}
		return nil
	})
	require.NoError(t, err)
	require.Len(t, before, len(all))
	for _, o := range all {
		require.Len(t, before[o.id][0], len(o.inbox))
		require.Len(t, before[o.id][1], len(o.inboxNext))
	}

	var r corosql.Report
	require.NoError(t, corosql.Migrate(ctx, db, corosql.Reporting(&r)))
	migrations, err := corosql.Migrations()
	require.NoError(t, err)
	require.Equal(t, migrations[8:], r.Migrations)
	require.Equal(t, "0009_messages.sql", r.Migrations[0].Name)
	functions, err := corosql.FunctionFiles()
	require.NoError(t, err)
	require.Equal(t, functions, r.Functions, "every function file applied again")
	require.Equal(t, schemaOf(t, testdb.New(t)), schemaOf(t, db))

	// Every message is a row of its task, seq from 1 in the order inbox
	// then inbox_next, its envelope as it was.
	moved := map[tasks.ID][][]byte{}
	rows, err = db.Query(ctx, `SELECT task_id, seq, envelope FROM corotask.messages ORDER BY task_id, seq`)
	require.NoError(t, err)
	var seq int64
	var envelope []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &seq, &envelope}, func() error {
		moved[id] = append(moved[id], append([]byte(nil), envelope...))
		require.Equal(t, int64(len(moved[id])), seq, "task %s: seqs from 1, with no gap", id)
		return nil
	})
	require.NoError(t, err)
	for _, o := range all {
		want := append(append([][]byte{}, before[o.id][0]...), before[o.id][1]...)
		if len(want) == 0 {
			require.NotContains(t, moved, o.id, "task %s had no messages", o.id)
			continue
		}
		require.Equal(t, want, moved[o.id], "task %s: its inbox then its inbox_next", o.id)
	}
	require.Len(t, moved, len(all)-1, "no message of a task that does not exist")

	// The counters, and Get's view: the same inbox and inbox_next as before.
	for _, o := range all {
		var msgSeq, popped int64
		var inboxLen, nextLen int
		var wakes bool
		require.NoError(t, db.QueryRow(ctx, `SELECT msg_seq, msg_popped, inbox_len, inbox_next_len, next_wakes
			FROM corotask.tasks WHERE task_id = $1`, o.id).Scan(&msgSeq, &popped, &inboxLen, &nextLen, &wakes))
		require.Equal(t, []any{int64(len(o.inbox) + len(o.inboxNext)), int64(0), len(o.inbox), len(o.inboxNext), o.wantWakes},
			[]any{msgSeq, popped, inboxLen, nextLen, wakes}, "task %s: msg_seq, msg_popped, inbox_len, inbox_next_len, next_wakes", o.id)
		task, err := tasks.Get(ctx, db, o.id)
		require.NoError(t, err)
		require.Equal(t, o.wantStatus, task.Status, "task %s", o.id)
		require.Equal(t, rawMessages(before[o.id][0]), task.Inbox, "task %s: inbox", o.id)
		require.Equal(t, rawMessages(before[o.id][1]), task.InboxNext, "task %s: inbox_next", o.id)
		require.Equal(t, []int{len(o.inbox), len(o.inboxNext)}, []int{task.InboxLen, task.InboxNextLen})
	}

	// Each role holds on the messages what it holds on the tasks.
	for _, c := range []struct {
		role, privilege string
		want            bool
	}{
		{reader, "SELECT", true}, {reader, "INSERT", false}, {reader, "UPDATE", false}, {reader, "DELETE", false},
		{writer, "SELECT", true}, {writer, "INSERT", true}, {writer, "UPDATE", true}, {writer, "DELETE", true},
		{writer, "TRUNCATE", false},
	} {
		var has bool
		require.NoError(t, db.QueryRow(ctx, `SELECT has_table_privilege($1, 'corotask.messages', $2)`, c.role, c.privilege).Scan(&has))
		require.Equal(t, c.want, has, "%s %s on corotask.messages", c.role, c.privilege)
	}
	var public []string
	require.NoError(t, db.QueryRow(ctx, `SELECT coalesce(array_agg(a.privilege_type ORDER BY a.privilege_type), '{}')
		FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) AS a
		WHERE c.oid = 'corotask.messages'::regclass AND a.grantee = 0`).Scan(&public))
	require.Equal(t, []string{"SELECT"}, public, "PUBLIC's grant mirrored")

	// Messages sent after the upgrade follow the moved ones: one wakes the
	// suspended task, one waits in the running task's inbox_next.
	require.NoError(t, inbox.Send(ctx, db, suspended.id, sender, "after the upgrade"))
	require.NoError(t, inbox.Send(ctx, db, running.id, tasks.ID{}, "running 4, after the upgrade"))
	last := func(id tasks.ID) []byte {
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		require.NotEmpty(t, task.Inbox)
		return task.Inbox[len(task.Inbox)-1]
	}
	suspendedAfter := last(suspended.id)
	runningTask, err := tasks.Get(ctx, db, running.id)
	require.NoError(t, err)
	require.Len(t, runningTask.InboxNext, len(running.inboxNext)+1)
	runningAfter := runningTask.InboxNext[len(running.inboxNext)]

	e := executor.MustNew(db, executor.Config{})
	var mu sync.Mutex
	seen := map[tasks.ID][]seenMessage{}
	polls := map[tasks.ID]int{}
	executor.Register(e, "job", executor.PollerFunc[int, json.RawMessage](func(ctx context.Context, t *executor.Task[int, json.RawMessage]) (executor.Action, error) {
		mu.Lock()
		defer mu.Unlock()
		polls[t.ID]++
		got := []seenMessage{}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			if m.DecodeErr != nil {
				return executor.Action{}, fmt.Errorf("message %d: %w", len(got), m.DecodeErr)
			}
			got = append(got, seenMessage{From: m.From, Body: string(m.Body), Done: m.Done, Err: m.Err})
		}
		if seen[t.ID] == nil {
			seen[t.ID] = got // empty, not nil, for a poll shown nothing
		} else {
			seen[t.ID] = append(seen[t.ID], got...)
		}
		return executor.Done(), nil
	}))
	shownAs := func(id tasks.ID, extra ...[]byte) []seenMessage {
		out := []seenMessage{}
		for _, env := range append(append(append([][]byte{}, before[id][0]...), before[id][1]...), extra...) {
			out = append(out, seenOf(t, env))
		}
		return out
	}

	// The ready tasks, the one the new message woke, and the one whose
	// claim expired; not those whose claims are still valid.
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, map[tasks.ID][]seenMessage{
		ready.id:     shownAs(ready.id),
		suspended.id: shownAs(suspended.id, suspendedAfter),
		dead.id:      shownAs(dead.id),
		empty.id:     {},
	}, seen)

	// The running tasks' executors die: their claims expire, and they are
	// taken over.
	tag, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim_expires_at = now() - interval '1 second'
		WHERE task_id = ANY ($1) AND claim IS NOT NULL`, []tasks.ID{running.id, resultOnly.id, failedChild.id})
	require.NoError(t, err)
	require.EqualValues(t, 3, tag.RowsAffected())
	n, err = e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = e.PollOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to poll")
	require.Equal(t, map[tasks.ID][]seenMessage{
		ready.id:       shownAs(ready.id),
		suspended.id:   shownAs(suspended.id, suspendedAfter),
		dead.id:        shownAs(dead.id),
		empty.id:       {},
		running.id:     shownAs(running.id, runningAfter),
		resultOnly.id:  shownAs(resultOnly.id),
		failedChild.id: shownAs(failedChild.id),
	}, seen)
	for id, n := range polls {
		require.Equal(t, 1, n, "task %s polled once", id)
	}
	require.Equal(t, []seenMessage{{Body: `"running 1"`}, {From: sender, Body: `"running 2"`}},
		seen[running.id][:2], "the inbox first, as sent")

	// The polled tasks ended with nothing left; the ended task keeps its
	// leftover messages.
	for _, o := range all {
		var inboxLen, nextLen, rowsLeft int
		var msgSeq, popped int64
		require.NoError(t, db.QueryRow(ctx, `SELECT t.inbox_len, t.inbox_next_len, t.msg_seq, t.msg_popped,
				(SELECT count(*) FROM corotask.messages m WHERE m.task_id = t.task_id)
			FROM corotask.tasks t WHERE t.task_id = $1`, o.id).Scan(&inboxLen, &nextLen, &msgSeq, &popped, &rowsLeft))
		task, err := tasks.Get(ctx, db, o.id)
		require.NoError(t, err)
		require.Equal(t, tasks.StatusDone, task.Status, "task %s", o.id)
		if o.ended {
			require.Equal(t, []int{len(o.inbox), 0, len(o.inbox)}, []int{inboxLen, nextLen, rowsLeft})
			require.Equal(t, rawMessages(before[o.id][0]), task.Inbox)
			continue
		}
		require.Equal(t, []int{0, 0, 0}, []int{inboxLen, nextLen, rowsLeft}, "task %s: inbox_len, inbox_next_len, message rows", o.id)
		require.Equal(t, msgSeq, popped, "task %s: every message popped", o.id)
	}
}
