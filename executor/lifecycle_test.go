package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// An executor that died between its claim and its commit leaves the task
// running with a stale heartbeat, and messages that arrived meanwhile in
// inbox_next. Another executor takes the task over and sees every message.
func TestCrashBetweenClaimAndCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", State: 1})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "before the crash"))
	// The dead executor's claim: its heartbeat stopped a minute ago, and the
	// claim expired.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET heartbeat = now() - interval '1 minute', claim = gen_random_uuid(),
		claim_expires_at = now() - interval '30 seconds' WHERE task_id = $1`, id)
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "during the dead poll"))

	e := executor.MustNew(db, fastConfig(t))
	var got []string
	executor.Register(e, "job", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			got = append(got, m.Body)
		}
		t.State++
		return executor.Suspend(), nil
	}))
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"before the crash", "during the dead poll"}, got)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusSuspended, task.Status)
	require.JSONEq(t, "2", string(task.State))
	require.Zero(t, task.InboxLen+task.InboxNextLen)
}

// A fresh claim is not taken over: only a stale one is.
func TestRunningTaskIsNotClaimedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job"})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET heartbeat = now(), claim = gen_random_uuid() WHERE task_id = $1`, id)
	require.NoError(t, err)
	e := executor.MustNew(db, fastConfig(t))
	executor.Register(e, "job", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.Done(), nil
	}))
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

// One poll spawns many children and sends many messages, all in one commit,
// and fans in all their completions.
func TestManyEffectsInOneCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	const kids = 300
	type fan struct {
		Spawned bool
		Sum     int
		Heard   int
	}
	sink, err := tasks.Create(ctx, db, tasks.Spec{Type: "sink", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	executor.Register(e, "fan", executor.PollerFunc[fan, int](func(ctx context.Context, t *executor.Task[fan, int]) (executor.Action, error) {
		if !t.State.Spawned {
			t.State.Spawned = true
			for i := 1; i <= kids; i++ {
				t.Spawn("kid", nil, i)
				t.Send(sink, i)
			}
			return executor.Suspend(), nil
		}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			t.State.Sum += m.Body
			t.State.Heard++
		}
		if t.State.Heard == kids {
			return executor.DoneWith(t.State.Sum), nil
		}
		return executor.Suspend(), nil
	}))
	executor.Register(e, "kid", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		m, _ := t.Inbox.Pop()
		return executor.DoneWith(m.Body * 2), nil
	}))
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "fan"})
	require.NoError(t, err)
	_, err = e.PollOnce(ctx)
	require.NoError(t, err)

	s, err := tasks.Get(ctx, db, sink)
	require.NoError(t, err)
	require.Len(t, s.Inbox, kids, "every message sent in one commit")
	for i, raw := range s.Inbox {
		require.JSONEq(t, fmt.Sprintf(`{"from":%q,"body":%d}`, root.UUID(), i+1), testdb.WithoutSentAt(t, raw), "in the order sent")
	}

	start(t, e)
	task := waitStatus(t, db, root, tasks.StatusDone)
	require.JSONEq(t, fmt.Sprint(kids*(kids+1)), string(task.Result))
}

// Batched commits apply effects per batch, yet each poll's effects keep
// their order: a message to a child spawned in the same poll follows the
// child's first message, and a child's last message to its parent precedes
// its completion.
func TestEffectsKeepTheirOrderInBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	const kids = 60
	type parent struct {
		Spawned bool
		Heard   map[string]string // child -> "msg" or "msg,done"
		Done    int
	}
	var bad atomic.Value
	executor.Register(e, "parent", executor.PollerFunc[parent, json.RawMessage](func(ctx context.Context, t *executor.Task[parent, json.RawMessage]) (executor.Action, error) {
		if !t.State.Spawned {
			t.State.Spawned, t.State.Heard = true, map[string]string{}
			for range kids {
				kid := t.Spawn("kid", nil, "first")
				t.Send(kid, "second")
			}
			return executor.Suspend(), nil
		}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			from := m.From.String()
			switch {
			case m.Done:
				if t.State.Heard[from] != "msg" {
					bad.Store("completion of " + from + " before its message")
				}
				t.State.Heard[from] += ",done"
				t.State.Done++
			default:
				t.State.Heard[from] = "msg"
			}
		}
		if t.State.Done == kids {
			return executor.Done(), nil
		}
		return executor.Suspend(), nil
	}))
	executor.Register(e, "kid", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		var got []string
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			got = append(got, m.Body)
		}
		if len(got) != 2 || got[0] != "first" || got[1] != "second" {
			bad.Store(fmt.Sprintf("child %s got %q", t.ID, got))
		}
		t.Send(t.Parent, "hello")
		return executor.Done(), nil
	}))
	start(t, e)
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	waitStatus(t, db, root, tasks.StatusDone)
	require.Nil(t, bad.Load())
}

// With LISTEN off (PgBouncer in transaction mode), the executor finds work
// by looking every PollInterval. Such deployments often turn pgx's
// statement cache off too, so every query mode that describes statements is
// tried.
func TestWorksWithListenDisabled(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.Pool(t, withQueryExecMode(t, testdb.URL(t), mode))
			cfg := fastConfig(t)
			cfg.DisableListen = true
			e := executor.MustNew(db, cfg)
			executor.Register(e, "echo", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
				if m, ok := t.Inbox.Pop(); ok {
					return executor.DoneWith(m.Body), nil
				}
				return executor.Suspend(), nil
			}))
			start(t, e)
			id, err := tasks.Create(ctx, db, tasks.Spec{Type: "echo"})
			require.NoError(t, err)
			waitStatus(t, db, id, tasks.StatusSuspended)
			require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "hello"))
			task := waitStatus(t, db, id, tasks.StatusDone)
			require.JSONEq(t, `"hello"`, string(task.Result))
		})
	}
}

// Query modes that guess parameter types from Go types cannot carry
// corotask's arrays: Run says so instead of failing at the first commit.
func TestRunRefusesQueryModesWithoutDescribe(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	for _, mode := range []string{"exec", "simple_protocol"} {
		db := testdb.Pool(t, withQueryExecMode(t, url, mode))
		e := executor.MustNew(db, fastConfig(t))
		executor.Register(e, "a", executor.PollerFunc[int, int](func(context.Context, *executor.Task[int, int]) (executor.Action, error) {
			return executor.Done(), nil
		}))
		err := e.Run(context.Background())
		require.ErrorContains(t, err, "default_query_exec_mode "+mode+" is not supported")
	}
}

func withQueryExecMode(t *testing.T, rawURL, mode string) string {
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("default_query_exec_mode", mode)
	u.RawQuery = q.Encode()
	return u.String()
}

// Sleep and SleepUntil wake the task when asked, without a message.
func TestSleepWakesOnTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := fastConfig(t)
	cfg.PollInterval = time.Hour // the executor must wake at wake_at, not at its fallback poll
	e := executor.MustNew(db, cfg)
	executor.Register(e, "sleeper", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		t.State++
		switch t.State {
		case 1:
			return executor.Sleep(200 * time.Millisecond), nil
		case 2:
			return executor.SleepUntil(time.Now().Add(200 * time.Millisecond)), nil
		}
		return executor.Done(), nil
	}))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "sleeper"})
	require.NoError(t, err)
	began := time.Now()
	start(t, e)
	waitStatus(t, db, id, tasks.StatusDone)
	require.GreaterOrEqual(t, time.Since(began), 400*time.Millisecond)
}

func TestVacuumIfNeeded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var autovacuum string
	require.NoError(t, db.QueryRow(ctx, "SHOW autovacuum").Scan(&autovacuum))
	done, err := e.VacuumIfNeeded(ctx)
	require.NoError(t, err)
	require.False(t, done, "nothing to vacuum in an empty table")

	createN(t, db, "job", 3000)
	_, err = db.Exec(ctx, "UPDATE corotask.tasks SET failures = 1")
	require.NoError(t, err)
	// The statistics reach pg_stat_user_tables shortly after the commit.
	require.Eventually(t, func() bool {
		var dead int
		_, _ = db.Exec(ctx, "SELECT pg_stat_force_next_flush()")
		require.NoError(t, db.QueryRow(ctx, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'corotask.tasks'::regclass").Scan(&dead))
		return dead >= 3000
	}, testdb.Patience, 20*time.Millisecond)
	done, err = e.VacuumIfNeeded(ctx)
	require.NoError(t, err)
	require.Equal(t, autovacuum == "off", done, "vacuums only when autovacuum is off")
}
