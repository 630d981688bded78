package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/tasks"
)

// controlRow is a row of corotask.control_history.
type controlRow struct{ Action, Subject, Detail, By string }

// controlHistory returns the rows of corotask.control_history, oldest first.
func controlHistory(t *testing.T, db tasks.DB) []controlRow {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`SELECT action, subject, coalesce(detail, ''), by_role FROM corotask.control_history ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (controlRow, error) {
		var c controlRow
		return c, r.Scan(&c.Action, &c.Subject, &c.Detail, &c.By)
	})
	require.NoError(t, err)
	return out
}

// controlledTypes returns the types that have a row in corotask.type_controls.
func controlledTypes(t *testing.T, db tasks.DB) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT task_type FROM corotask.type_controls ORDER BY 1`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// role is the database role of the tests' sessions.
func role(t *testing.T, db tasks.DB) string {
	t.Helper()
	var r string
	require.NoError(t, db.QueryRow(context.Background(), `SELECT session_user`).Scan(&r))
	return r
}

// createTasks creates n ready tasks of typ, with limit key key ("": none).
func createTasks(t *testing.T, db tasks.DB, typ tasks.Type, key string, n int) []tasks.ID {
	t.Helper()
	ctx := context.Background()
	var ids []tasks.ID
	for range n {
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: typ})
		require.NoError(t, err)
		if key != "" {
			_, err = db.Exec(ctx, `UPDATE corotask.tasks SET limit_key = $2 WHERE task_id = $1`, id, key)
			require.NoError(t, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// run makes task id running, as a claim would: claimed by an executor for
// a minute of corotask's clock, counted toward its type's maximum.
func run(t *testing.T, db tasks.DB, id tasks.ID) {
	t.Helper()
	_, err := db.Exec(context.Background(), `UPDATE corotask.tasks SET claim = gen_random_uuid(), claimed_by = gen_random_uuid(),
		claimed_at = now(), heartbeat = now(), claim_expires_at = corotask.now() + interval '1 minute', counted = true
		WHERE task_id = $1`, id)
	require.NoError(t, err)
}

// controlsOf reads the controls of typ, which must have some.
func controlsOf(t *testing.T, db tasks.DB, typ tasks.Type) tasks.TypeControls {
	t.Helper()
	c, err := tasks.Controls(context.Background(), db)
	require.NoError(t, err)
	tc, ok := c.Type(typ)
	require.True(t, ok, "%s has controls", typ)
	return tc
}

func requireCode(t *testing.T, err error, code string) {
	t.Helper()
	var pg *pgconn.PgError
	require.True(t, errors.As(err, &pg), "%v", err)
	require.Equal(t, code, pg.Code, "%v", err)
}

func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := corotasktest.NewDB(t)
	me := role(t, db)
	createTasks(t, db, "mail", "", 2)

	// A type nobody knows is refused, unless allowed.
	err := tasks.Pause(ctx, db, "mial")
	require.ErrorIs(t, err, tasks.ErrUnknownType)
	require.ErrorContains(t, err, `unknown task type "mial"`)
	requireCode(t, err, "CT4T4")
	require.NoError(t, tasks.Pause(ctx, db, "mial", tasks.AllowNewType()))

	require.NoError(t, tasks.Pause(ctx, db, "mail"))
	c := controlsOf(t, db, "mail")
	require.True(t, c.Paused())
	require.Equal(t, me, c.PausedBy)
	require.Equal(t, 2, c.Ready)
	require.Equal(t, 2, c.Waiting, "a paused type's ready tasks all wait")

	err = tasks.Pause(ctx, db, "mail")
	require.ErrorIs(t, err, tasks.ErrPaused)
	require.ErrorContains(t, err, `type "mail" is paused already, since `)
	require.ErrorContains(t, err, " by "+me)
	requireCode(t, err, "CT4P9")

	require.NoError(t, tasks.Resume(ctx, db, "mail"))
	err = tasks.Resume(ctx, db, "mail")
	require.ErrorIs(t, err, tasks.ErrNotPaused)
	require.ErrorContains(t, err, `type "mail" is not paused`)
	require.ErrorIs(t, tasks.Resume(ctx, db, "never"), tasks.ErrNotPaused)
	require.ErrorContains(t, tasks.Pause(ctx, db, ""), "empty")
	require.ErrorContains(t, tasks.Resume(ctx, db, " mail"), "leading or trailing space")

	// The row of a type with no control left is deleted.
	require.Equal(t, []string{"mial"}, controlledTypes(t, db))
	h := controlHistory(t, db)
	require.Len(t, h, 3, "refusals record nothing")
	require.Equal(t, controlRow{"pause", "mial", "", me}, h[0])
	require.Equal(t, controlRow{"pause", "mail", "", me}, h[1])
	require.Equal(t, "resume", h[2].Action)
	require.Regexp(t, `^paused since \d{4}-.* by `+me+`$`, h[2].Detail)
}

func TestMaxRunning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := corotasktest.NewDB(t)
	ids := createTasks(t, db, "job", "", 4)

	for _, max := range []int{0, -1} {
		err := tasks.SetMaxRunning(ctx, db, "job", max)
		require.ErrorContains(t, err, "below 1", max)
	}
	require.ErrorIs(t, tasks.SetMaxRunning(ctx, db, "jbo", 2), tasks.ErrUnknownType)
	require.NoError(t, tasks.SetMaxRunning(ctx, db, "jbo", 2, tasks.AllowNewType()))
	require.NoError(t, tasks.ClearMaxRunning(ctx, db, "jbo"))

	require.NoError(t, tasks.SetMaxRunning(ctx, db, "job", 2))
	run(t, db, ids[0])
	c := controlsOf(t, db, "job")
	require.Equal(t, 2, c.MaxRunning)
	require.Equal(t, 1, c.Running)
	require.Equal(t, 3, c.Ready)
	require.Equal(t, 0, c.Waiting, "below its maximum, nothing waits")

	run(t, db, ids[1])
	c = controlsOf(t, db, "job")
	require.Equal(t, 2, c.Running)
	require.Equal(t, 2, c.Waiting, "at its maximum, every ready task waits")

	// An expired claim stops counting.
	_, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim_expires_at = corotask.now() - interval '1 second' WHERE task_id = $1`, ids[1])
	require.NoError(t, err)
	c = controlsOf(t, db, "job")
	require.Equal(t, 1, c.Running)
	require.Equal(t, 0, c.Waiting)

	// A running claim that does not count (claimed before the maximum) is
	// not counted.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET counted = false WHERE task_id = $1`, ids[0])
	require.NoError(t, err)
	require.Equal(t, 0, controlsOf(t, db, "job").Running)

	require.NoError(t, tasks.ClearMaxRunning(ctx, db, "job"))
	require.NoError(t, tasks.ClearMaxRunning(ctx, db, "job"), "a type without a maximum is left as it is")
	require.Empty(t, controlledTypes(t, db))
	var details []string
	for _, h := range controlHistory(t, db) {
		require.Equal(t, "max_running", h.Action)
		details = append(details, h.Subject+" "+h.Detail)
	}
	require.Equal(t, []string{"jbo 2", "jbo cleared", "job 2", "job cleared"}, details)
}

// The polls of a type already running when it gets a maximum count toward
// it from then on: those whose claim left counted NULL (a type without
// controls) and those an earlier build marked false alike.
func TestMaxRunningCountsThePollsRunningBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := corotasktest.NewDB(t)
	ids := createTasks(t, db, "job", "", 3)
	for i, counted := range []any{nil, false} {
		_, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid(), claimed_by = gen_random_uuid(),
			claimed_at = now(), heartbeat = now(), claim_expires_at = corotask.now() + interval '1 minute', counted = $2
			WHERE task_id = $1`, ids[i], counted)
		require.NoError(t, err)
	}
	require.NoError(t, tasks.SetMaxRunning(ctx, db, "job", 2))
	c := controlsOf(t, db, "job")
	require.Equal(t, 2, c.Running, "both running polls count")
	require.Equal(t, 1, c.Waiting, "at its maximum, the ready task waits")
}

func TestKeyLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := corotasktest.NewDB(t)
	a := createTasks(t, db, "a", "tenant-1", 2)
	b := createTasks(t, db, "b", "tenant-1", 1)
	createTasks(t, db, "b", "tenant-2", 1)
	createTasks(t, db, "b", "", 1)

	require.ErrorContains(t, tasks.SetKeyLimit(ctx, db, "tenants", 0, []tasks.Type{"a"}), "max 0 is below 1")
	require.ErrorContains(t, tasks.SetKeyLimit(ctx, db, "tenants", -3, []tasks.Type{"a"}), "max -3 is below 1")
	require.ErrorContains(t, tasks.SetKeyLimit(ctx, db, "", 1, []tasks.Type{"a"}), "empty key space")
	require.ErrorContains(t, tasks.SetKeyLimit(ctx, db, "tenants", 1, nil), "no types")
	err := tasks.SetKeyLimit(ctx, db, "tenants", 1, []tasks.Type{"a", "c"})
	require.ErrorIs(t, err, tasks.ErrUnknownType)
	require.ErrorContains(t, err, `"c"`)
	require.Empty(t, controlledTypes(t, db), "a refusal changes nothing")

	require.NoError(t, tasks.SetKeyLimit(ctx, db, "tenants", 1, []tasks.Type{"b", "a", "a"}))
	got, err := tasks.Get(ctx, db, a[0])
	require.NoError(t, err)
	require.Equal(t, "tenant-1", got.LimitKey)

	run(t, db, a[0])
	all, err := tasks.Controls(ctx, db)
	require.NoError(t, err)
	require.Len(t, all.KeySpaces, 1)
	space := all.KeySpaces[0]
	require.Equal(t, "tenants", space.Name)
	require.Equal(t, 1, space.MaxRunning)
	require.Equal(t, []tasks.Type{"a", "b"}, space.Types)
	require.Equal(t, 1, space.KeysAtLimit)
	require.Equal(t, []tasks.KeyLoad{{Key: "tenant-1", Running: 1, Waiting: 2}}, space.Keys)
	ca, _ := all.Type("a")
	cb, _ := all.Type("b")
	require.Equal(t, "tenants", ca.KeySpace)
	require.Equal(t, 1, ca.Waiting, "a's other task of tenant-1 waits")
	require.Equal(t, 3, cb.Ready)
	require.Equal(t, 1, cb.Waiting, "b's task of tenant-1 waits, not that of tenant-2 nor that without a key")

	// A running task of another key space's type does not count.
	require.NoError(t, tasks.SetKeyLimit(ctx, db, "tenants", 1, []tasks.Type{"b"}))
	require.Equal(t, []string{"b"}, controlledTypes(t, db), "a left the space, and has no control left")
	require.Equal(t, 0, controlsOf(t, db, "b").Waiting)
	run(t, db, b[0])
	require.Equal(t, 0, controlsOf(t, db, "b").Waiting, "tenant-1 is at its limit, but b has no other task of it")

	require.NoError(t, tasks.ClearKeyLimit(ctx, db, "tenants"))
	require.Empty(t, controlledTypes(t, db))
	err = tasks.ClearKeyLimit(ctx, db, "tenants")
	require.ErrorIs(t, err, tasks.ErrNoKeyLimit)
	require.ErrorContains(t, err, `"tenants"`)

	me := role(t, db)
	require.Equal(t, []controlRow{
		{"key_limit", "tenants", "1 per key, types a, b", me},
		{"key_limit", "tenants", "1 per key, types b", me},
		{"key_limit", "tenants", "cleared", me},
	}, controlHistory(t, db))
}

// Acquire refills the bucket by corotask's clock: rate per per,
// continuously, up to rate.
func TestAcquireRefillsByTheClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := corotasktest.NewClock()
	db := corotasktest.NewDB(t, corotasktest.WithClock(clock))

	require.NoError(t, tasks.SetRateLimit(ctx, db, "api", 8, time.Second, nil))
	acquire := func(n int) time.Duration {
		t.Helper()
		wait, err := tasks.Acquire(ctx, db, "api", n)
		require.NoError(t, err)
		return wait
	}
	require.Zero(t, acquire(3), "a new limit starts full")
	require.Equal(t, 375*time.Millisecond, acquire(8), "5 left: 3 more take 3/8 s")
	require.Equal(t, 375*time.Millisecond, acquire(8), "a refused take takes nothing")
	clock.Advance(125 * time.Millisecond)
	require.Equal(t, 250*time.Millisecond, acquire(8))
	clock.Advance(250 * time.Millisecond)
	require.Zero(t, acquire(8))
	require.Equal(t, 125*time.Millisecond, acquire(1), "empty")

	clock.Advance(time.Hour)
	all, err := tasks.Controls(ctx, db)
	require.NoError(t, err)
	require.Equal(t, []tasks.RateLimit{{Name: "api", Rate: 8, Per: time.Second, Tokens: 8, Types: []tasks.Type{}}}, all.RateLimits,
		"it refills up to its rate")
	require.Zero(t, acquire(8))

	// Setting it again keeps its tokens, up to the new rate.
	clock.Advance(500 * time.Millisecond)
	require.NoError(t, tasks.SetRateLimit(ctx, db, "api", 2, time.Second, nil))
	require.Zero(t, acquire(2), "4 tokens refilled, 2 kept")
	require.Equal(t, 500*time.Millisecond, acquire(1), "at the new rate")
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := corotasktest.NewClock()
	db := corotasktest.NewDB(t, corotasktest.WithClock(clock))
	createTasks(t, db, "fetch", "", 2)

	require.ErrorContains(t, tasks.SetRateLimit(ctx, db, "api", 0, time.Second, nil), "rate 0 is below 1")
	require.ErrorContains(t, tasks.SetRateLimit(ctx, db, "api", 5, 0, nil), "period 0s is below a millisecond")
	require.ErrorContains(t, tasks.SetRateLimit(ctx, db, "api", 5, -time.Second, nil), "period -1s is below a millisecond")
	require.ErrorContains(t, tasks.SetRateLimit(ctx, db, "api", 5, 500*time.Microsecond, nil), "below a millisecond")
	require.ErrorContains(t, tasks.SetRateLimit(ctx, db, "", 5, time.Second, nil), "empty rate limit")
	require.ErrorIs(t, tasks.SetRateLimit(ctx, db, "api", 5, time.Second, []tasks.Type{"fecth"}), tasks.ErrUnknownType)
	require.NoError(t, tasks.SetRateLimit(ctx, db, "api", 5, time.Minute, []tasks.Type{"fetch"}))

	c := controlsOf(t, db, "fetch")
	require.Equal(t, "api", c.RateLimit)
	require.Equal(t, 0, c.Waiting, "tokens left")
	_, err := tasks.Acquire(ctx, db, "api", 5)
	require.NoError(t, err)
	require.Equal(t, 2, controlsOf(t, db, "fetch").Waiting, "no whole token: every ready task waits")
	clock.Advance(12 * time.Second)
	require.Equal(t, 0, controlsOf(t, db, "fetch").Waiting, "a token refilled")

	_, err = tasks.Acquire(ctx, db, "nope", 1)
	require.ErrorIs(t, err, tasks.ErrNoRateLimit)
	require.ErrorContains(t, err, `no rate limit "nope"`)
	requireCode(t, err, "CT4R4")
	_, err = tasks.Acquire(ctx, db, "api", 6)
	require.ErrorContains(t, err, `take 6 tokens of rate limit "api": more than its rate, 5`)
	requireCode(t, err, "22023")
	for _, n := range []int{0, -1} {
		_, err = tasks.Acquire(ctx, db, "api", n)
		require.ErrorContains(t, err, "at least 1")
	}

	require.NoError(t, tasks.ClearRateLimit(ctx, db, "api"))
	require.Empty(t, controlledTypes(t, db))
	require.ErrorIs(t, tasks.ClearRateLimit(ctx, db, "api"), tasks.ErrNoRateLimit)
	_, err = tasks.Acquire(ctx, db, "api", 1)
	require.ErrorIs(t, err, tasks.ErrNoRateLimit)

	me := role(t, db)
	require.Equal(t, []controlRow{
		{"rate_limit", "api", "5 per 00:01:00, types fetch", me},
		{"rate_limit", "api", "cleared", me},
	}, controlHistory(t, db), "takes are not recorded")
}

func TestSetPriority(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := corotasktest.NewDB(t)
	ids := createTasks(t, db, "job", "", 3)
	before, err := tasks.Get(ctx, db, ids[0])
	require.NoError(t, err)
	require.Zero(t, before.Priority)

	require.NoError(t, tasks.SetPriority(ctx, db, ids[0], 7))
	require.NoError(t, tasks.SetPriority(ctx, db, ids[0], tasks.MaxPriority))
	after, err := tasks.Get(ctx, db, ids[0])
	require.NoError(t, err)
	require.Equal(t, tasks.MaxPriority, after.Priority)
	require.Equal(t, before.Attempts+2, after.Attempts)
	listed, err := tasks.List(ctx, db, tasks.Filter{Type: "job"})
	require.NoError(t, err)
	require.Equal(t, tasks.MaxPriority, listed[0].Priority)

	h, err := tasks.History(ctx, db, ids[0], tasks.HistoryOptions{})
	require.NoError(t, err)
	require.Len(t, h, 2)
	require.Equal(t, tasks.OperatorAction, h[1].Outcome)
	require.Equal(t, "priority", h[1].Action)
	require.Equal(t, after.Attempts, h[1].Attempt)
	me := role(t, db)
	require.Equal(t, me, h[1].Actor)
	require.Equal(t, []controlRow{
		{"priority", uuidText(t, db, ids[0]), "7 (was 0)", me},
		{"priority", uuidText(t, db, ids[0]), "32767 (was 7)", me},
	}, controlHistory(t, db))

	for _, p := range []int{-1, tasks.MaxPriority + 1} {
		require.ErrorContains(t, tasks.SetPriority(ctx, db, ids[1], p), fmt.Sprintf("invalid priority %d: priorities run from 0 (the default, the lowest) to 32767", p))
	}
	require.NoError(t, tasks.Cancel(ctx, db, ids[1]))
	err = tasks.SetPriority(ctx, db, ids[1], 1)
	require.ErrorIs(t, err, tasks.ErrEnded)
	require.ErrorContains(t, err, ids[1].String())
	require.ErrorIs(t, tasks.SetPriority(ctx, db, tasks.NewID(), 1), tasks.ErrNotFound)
	run(t, db, ids[2])
	require.ErrorIs(t, tasks.SetPriority(ctx, db, ids[2], 1), tasks.ErrRunning)
	require.Len(t, controlHistory(t, db), 2, "refusals record nothing")
}

// The SQL functions refuse bad values themselves (22023, or 22004 for a
// NULL), for the SQL callers that no Go validation stands before.
func TestControlFunctionsRefuseBadValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := corotasktest.NewDB(t)
	id := createTasks(t, db, "job", "", 1)[0]
	_, err := db.Exec(ctx, `SELECT corotask.set_rate_limit('api', 5, interval '1 minute')`)
	require.NoError(t, err)
	for _, c := range []struct{ sql, code, text string }{
		{`SELECT corotask.pause_type('')`, "22023", "empty task type"},
		{`SELECT corotask.pause_type(NULL)`, "22004", "no task type"},
		{`SELECT corotask.pause_type(' job')`, "22023", "leading or trailing space"},
		{`SELECT corotask.set_max_running('job', 0)`, "22023", `maximum of running polls of type "job" must be at least 1, not 0`},
		{`SELECT corotask.set_max_running('job', NULL)`, "22023", "not NULL"},
		{`SELECT corotask.set_key_limit('s', 0, ARRAY['job'])`, "22023", "must be at least 1, not 0"},
		{`SELECT corotask.set_key_limit('', 1, ARRAY['job'])`, "22023", "empty key space"},
		{`SELECT corotask.set_key_limit('s', 1, '{}')`, "22023", "no task types"},
		{`SELECT corotask.set_key_limit('s', 1, ARRAY['job', ''])`, "22023", "empty task type"},
		{`SELECT corotask.set_rate_limit('r', 0, interval '1 s')`, "22023", "rate of rate limit \"r\" must be at least 1"},
		{`SELECT corotask.set_rate_limit('r', 1, interval '0')`, "22023", "at least 1 millisecond"},
		{`SELECT corotask.set_rate_limit('r', 1, interval '-1 s')`, "22023", "at least 1 millisecond"},
		{`SELECT corotask.acquire_tokens('api', 0)`, "22023", "at least 1"},
		{`SELECT corotask.acquire_tokens('api', 6)`, "22023", "more than its rate"},
		{`SELECT corotask.set_task_priority('` + uuidText(t, db, id) + `', 32768)`, "22023", "priority 32768 out of range"},
		{`SELECT corotask.set_task_priority('` + uuidText(t, db, id) + `', -1)`, "22023", "priority -1 out of range"},
	} {
		_, err := db.Exec(ctx, c.sql)
		requireCode(t, err, c.code)
		require.ErrorContains(t, err, c.text, c.sql)
	}
	require.Len(t, controlHistory(t, db), 1, "only the rate limit set")
}

func uuidText(t *testing.T, db *pgxpool.Pool, id tasks.ID) string {
	t.Helper()
	var s string
	require.NoError(t, db.QueryRow(context.Background(), `SELECT $1::uuid::text`, id).Scan(&s))
	return s
}

// Concurrent takes never take more than the bucket holds: the clock stands
// still, so exactly rate of them succeed.
func TestAcquireConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := corotasktest.NewClock()
	db := corotasktest.NewDB(t, corotasktest.WithClock(clock))
	require.NoError(t, tasks.SetRateLimit(ctx, db, "api", 5, time.Hour, nil))
	const takers = 12
	took := make(chan bool, takers)
	errs := make(chan error, takers)
	for range takers {
		go func() {
			wait, err := tasks.Acquire(ctx, db, "api", 1)
			errs <- err
			took <- err == nil && wait == 0
		}()
	}
	n := 0
	for range takers {
		require.NoError(t, <-errs)
		if <-took {
			n++
		}
	}
	require.Equal(t, 5, n)
	wait, err := tasks.Acquire(ctx, db, "api", 1)
	require.NoError(t, err)
	require.Equal(t, 12*time.Minute, wait, "empty: a token every 12 minutes")
}

// Setting a rate limit again without types keeps its types; an empty list
// detaches them.
func TestSetRateLimitKeepsItsTypes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := corotasktest.NewDB(t)
	opt := tasks.AllowNewType()
	require.NoError(t, tasks.SetRateLimit(ctx, db, "api", 10, time.Minute, []tasks.Type{"a", "b"}, opt))
	require.NoError(t, tasks.SetRateLimit(ctx, db, "api", 5, time.Minute, nil))
	c, err := tasks.Controls(ctx, db)
	require.NoError(t, err)
	require.Len(t, c.RateLimits, 1)
	require.Equal(t, []tasks.Type{"a", "b"}, c.RateLimits[0].Types)
	require.Equal(t, 5, c.RateLimits[0].Rate)
	require.NoError(t, tasks.SetRateLimit(ctx, db, "api", 5, time.Minute, []tasks.Type{}))
	c, err = tasks.Controls(ctx, db)
	require.NoError(t, err)
	require.Empty(t, c.RateLimits[0].Types)
}
