package sql_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// installFirstRelease sets db up as the first release's Migrate left it:
// its bookkeeping table and 0001_init.sql, nothing else.
func installFirstRelease(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	all, err := corosql.Migrations()
	require.NoError(t, err)
	first := all[0]
	require.Equal(t, "0001_init.sql", first.Name)
	_, err = db.Exec(ctx, `CREATE SCHEMA corotask;
		CREATE TABLE corotask.migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now(),
			checksum   text
		)`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, first.SQL)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO corotask.migrations (version, name, checksum) VALUES ($1, $2, $3)`,
		first.Version, first.Name, first.Checksum())
	require.NoError(t, err)
}

// A database the first release created, holding tasks it made (ready,
// suspended, and one running whose executor died, with messages in inbox and
// inbox_next), upgrades to the current schema, and its tasks then run.
func TestUpgradeFromTheFirstRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Pool(t, testdb.EmptyURL(t))
	installFirstRelease(t, db)

	// Tasks made through the first release's own SQL functions.
	create := func(msg string) tasks.ID {
		id := tasks.NewID()
		var m any
		if msg != "" {
			m = msg
		}
		body, err := json.Marshal(m)
		require.NoError(t, err)
		if msg == "" {
			body = nil
		}
		_, err = db.Exec(ctx, `SELECT corotask.create_task($1, 'job', NULL, NULL, $2)`, id, body)
		require.NoError(t, err)
		return id
	}
	send := func(to tasks.ID, msg string) {
		_, err := db.Exec(ctx, `SELECT corotask.send_to_task($1, NULL, to_jsonb($2::text))`, to, msg)
		require.NoError(t, err)
	}
	ready := create("ready 1")
	send(ready, "ready 2")
	suspended := create("")
	_, err := db.Exec(ctx, `UPDATE corotask.tasks SET wake_at = NULL WHERE task_id = $1`, suspended)
	require.NoError(t, err)
	running := create("running 1")
	// Claimed an hour ago by an executor that died; a message came meanwhile.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET heartbeat = now() - interval '1 hour', claim = gen_random_uuid()
		WHERE task_id = $1`, running)
	require.NoError(t, err)
	send(running, "running 2")
	var literal int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE heartbeat = '0001-01-01 00:00:00+00'`).Scan(&literal))
	require.Equal(t, 2, literal)
	// A parent with two children, one of which has ended (of a type no
	// executor below polls).
	parent, live, ended := tasks.NewID(), tasks.NewID(), tasks.NewID()
	for _, id := range []tasks.ID{parent, live, ended} {
		var p any
		if id != parent {
			p = parent
		}
		_, err := db.Exec(ctx, `SELECT corotask.create_task($1, 'tree', $2)`, id, p)
		require.NoError(t, err)
	}
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET done_at = now(), outcome = 'done', wake_at = NULL WHERE task_id = $1`, ended)
	require.NoError(t, err)

	var r corosql.Report
	require.NoError(t, corosql.Migrate(ctx, db, corosql.Reporting(&r)))
	all, err := corosql.Migrations()
	require.NoError(t, err)
	require.Equal(t, all[1:], r.Migrations, "every migration after the first")
	require.Equal(t, "0002_claims.sql", r.Migrations[0].Name)
	functions, err := corosql.FunctionFiles()
	require.NoError(t, err)
	require.Equal(t, functions, r.Functions)

	// The upgraded schema's functions, indexes and triggers are a fresh one's.
	require.Equal(t, schemaOf(t, testdb.New(t)), schemaOf(t, db))

	// Each task counts its live children.
	var liveChildren int
	require.NoError(t, db.QueryRow(ctx, `SELECT live_children FROM corotask.tasks WHERE task_id = $1`, parent).Scan(&liveChildren))
	require.Equal(t, 1, liveChildren)

	// "Not running" is claim IS NULL, with no heartbeat.
	var stray, expiring int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE claim IS NULL AND heartbeat IS NOT NULL),
		count(*) FILTER (WHERE claim IS NOT NULL AND claim_expires_at < now()) FROM corotask.tasks`).Scan(&stray, &expiring))
	require.Zero(t, stray)
	require.Equal(t, 1, expiring, "the dead executor's claim has expired")
	// The dead executor's task shows as held by an expired claim.
	for id, want := range map[tasks.ID]tasks.Status{ready: tasks.StatusReady, suspended: tasks.StatusSuspended, running: tasks.StatusStale} {
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		require.Equal(t, want, task.Status, "task %s", id)
		require.Equal(t, want == tasks.StatusStale, !task.Heartbeat.IsZero())
	}
	send(suspended, "suspended 1")

	e := executor.MustNew(db, executor.Config{})
	var mu sync.Mutex
	seen := map[tasks.ID][]string{}
	executor.Register(e, "job", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		mu.Lock()
		defer mu.Unlock()
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			seen[t.ID] = append(seen[t.ID], m.Body)
		}
		return executor.Done(), nil
	}))
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, map[tasks.ID][]string{
		ready:     {"ready 1", "ready 2"},
		suspended: {"suspended 1"},
		running:   {"running 1", "running 2"},
	}, seen)
	for _, id := range []tasks.ID{ready, suspended, running} {
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		require.Equal(t, tasks.StatusDone, task.Status)
	}
}

// schemaOf describes db's corotask functions (with their definitions, rights
// and settings), indexes, triggers, constraints, and the columns of its
// tasks and history.
func schemaOf(t *testing.T, db *pgxpool.Pool) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT p.oid::regprocedure::text || ' ' || pg_get_functiondef(p.oid) || ' ' || coalesce(p.proacl::text, '')
		FROM pg_proc p WHERE p.pronamespace = 'corotask'::regnamespace
		UNION ALL
		SELECT indexdef FROM pg_indexes WHERE schemaname = 'corotask'
		UNION ALL
		SELECT pg_get_triggerdef(g.oid) FROM pg_trigger g WHERE g.tgrelid = 'corotask.tasks'::regclass
		UNION ALL
		SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
		FROM information_schema.columns WHERE table_schema = 'corotask' AND table_name IN ('tasks', 'history')
		UNION ALL
		SELECT c.conrelid::regclass::text || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid)
		FROM pg_constraint c WHERE c.connamespace = 'corotask'::regnamespace
		ORDER BY 1`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// Two processes migrating a fresh database at once both succeed, and the
// schema is applied once.
func TestTwoMigratesAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.EmptyURL(t)
	reports := make([]corosql.Report, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				errs[i] = err
				return
			}
			defer pool.Close()
			errs[i] = corosql.Migrate(ctx, pool, corosql.Reporting(&reports[i]))
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	all, err := corosql.Migrations()
	require.NoError(t, err)
	// One applied everything, the other nothing.
	require.Equal(t, len(all), len(reports[0].Migrations)+len(reports[1].Migrations))
	require.True(t, len(reports[0].Migrations) == 0 || len(reports[1].Migrations) == 0)
	db := testdb.Pool(t, url)
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "works"})
	require.NoError(t, err)
}

// A function file whose contents differ from those last applied is applied
// again, and its functions keep their rights: SECURITY DEFINER, the empty
// search_path, and the grants made to roles.
func TestChangedFunctionFileIsReapplied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	role := "corotask_sender_" + strings.ToLower(tasks.NewID().String()[16:])
	_, err := db.Exec(ctx, `CREATE ROLE `+role+` NOLOGIN;
		GRANT EXECUTE ON FUNCTION corotask.send_to_task(uuid, uuid, jsonb) TO `+role)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role)
	})
	// As if the build that applied api.sql had another version of it.
	_, err = db.Exec(ctx, `CREATE OR REPLACE FUNCTION corotask.max_message_bytes() RETURNS integer
		LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 1';
		UPDATE corotask.function_files SET checksum = 'an older version' WHERE name = 'api.sql'`)
	require.NoError(t, err)

	var r corosql.Report
	require.NoError(t, corosql.Migrate(ctx, db, corosql.Reporting(&r)))
	require.Empty(t, r.Migrations)
	require.Len(t, r.Functions, 1)
	require.Equal(t, "api.sql", r.Functions[0].Name)
	var limit int
	require.NoError(t, db.QueryRow(ctx, `SELECT corotask.max_message_bytes()`).Scan(&limit))
	require.Equal(t, 1048576, limit)

	var definer, granted, public bool
	var config []string
	require.NoError(t, db.QueryRow(ctx, `SELECT p.prosecdef, p.proconfig,
			has_function_privilege($1, p.oid, 'EXECUTE'),
			EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0)
		FROM pg_proc p WHERE p.oid = 'corotask.send_to_task(uuid, uuid, jsonb)'::regprocedure`, role).
		Scan(&definer, &config, &granted, &public))
	require.True(t, definer)
	require.Equal(t, []string{`search_path=""`}, config)
	require.True(t, granted)
	require.False(t, public, "EXECUTE stays revoked from PUBLIC")
	// Up to date now.
	require.NoError(t, corosql.Migrate(ctx, db, corosql.Reporting(&r)))
	require.Empty(t, r.Functions)
}

// A database migrated by a newer build is refused, and left as it was.
func TestMigrateRefusesANewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	_, err := db.Exec(ctx, `INSERT INTO corotask.migrations (version, name, checksum) VALUES (9999, '9999_future.sql', 'x')`)
	require.NoError(t, err)
	err = corosql.Migrate(ctx, db)
	require.ErrorContains(t, err, "9999_future.sql")
	require.ErrorContains(t, err, "newer than this build")
}
