package executor_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// tracer records the trace contexts each poll learns of, and gives each
// poll the trace context {"traceparent": "poll <task id>"} (unless plain).
type tracer struct {
	executor.NoHooks
	plain bool
	mu    sync.Mutex
	infos map[tasks.ID][]executor.PollInfo
}

func (tr *tracer) PollStart(ctx context.Context, info *executor.PollInfo) context.Context {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.infos[info.Task] = append(tr.infos[info.Task], *info)
	if tr.plain {
		return ctx
	}
	return tasks.WithTrace(ctx, pollTrace(info.Task))
}

func (tr *tracer) polls(id tasks.ID) []executor.PollInfo {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]executor.PollInfo(nil), tr.infos[id]...)
}

func pollTrace(id tasks.ID) map[string]string {
	return map[string]string{"traceparent": "poll " + id.String()}
}

// storedTrace returns the trace column of task id, decoded; nil if NULL.
func storedTrace(t *testing.T, db *pgxpool.Pool, id tasks.ID) map[string]string {
	t.Helper()
	var raw []byte
	require.NoError(t, db.QueryRow(context.Background(), `SELECT trace FROM corotask.tasks WHERE task_id = $1`, id).Scan(&raw))
	if raw == nil {
		return nil
	}
	var out map[string]string
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// The trace context of the code that created a task, or sent a message,
// reaches the hooks of the polls that see them; what a poll spawns and sends
// carries the poll's own trace context (the one PollStart put in its
// context).
func TestTraceContextsReachThePolls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	tr := &tracer{infos: map[tasks.ID][]executor.PollInfo{}}
	cfg := fastConfig(t)
	cfg.Hooks = tr
	e := executor.MustNew(db, cfg)
	sink, err := tasks.Create(ctx, db, tasks.Spec{Type: "sink", WakeAt: farFuture()})
	require.NoError(t, err)
	var child tasks.ID
	executor.Register(e, "parent", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		for {
			if _, ok := t.Inbox.Pop(); !ok {
				break
			}
		}
		if t.State == 0 {
			t.State = 1
			child = t.Spawn("child", nil, "hello")
			t.Send(sink, "from the parent")
		}
		return executor.Suspend(), nil
	}))
	done := executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		return executor.Done(), nil
	})
	executor.Register(e, "child", done)
	executor.Register(e, "sink", done)

	created := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	parent, err := tasks.Create(tasks.WithTrace(ctx, created), db, tasks.Spec{Type: "parent", WakeAt: farFuture()})
	require.NoError(t, err)
	require.Equal(t, created, storedTrace(t, db, parent))
	sent := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "k=v"}
	require.NoError(t, inbox.Send(tasks.WithTrace(ctx, sent), db, parent, tasks.ID{}, "traced"))
	require.NoError(t, inbox.Send(ctx, db, parent, tasks.ID{}, "untraced"))

	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	polls := tr.polls(parent)
	require.Len(t, polls, 1)
	require.Equal(t, created, polls[0].Trace)
	require.Equal(t, []map[string]string{sent}, polls[0].MessageTraces)

	// The child and the message carry the parent's poll's trace context.
	require.Equal(t, pollTrace(parent), storedTrace(t, db, child))
	var env []byte
	require.NoError(t, db.QueryRow(ctx, `SELECT envelope FROM corotask.messages WHERE task_id = $1 ORDER BY seq LIMIT 1`, sink).Scan(&env))
	var envelope struct {
		Trace map[string]string `json:"trace"`
	}
	require.NoError(t, json.Unmarshal(env, &envelope))
	require.Equal(t, pollTrace(parent), envelope.Trace)

	n, err = e.PollOnce(ctx) // the child and the sink
	require.NoError(t, err)
	require.Equal(t, 2, n)
	childPolls := tr.polls(child)
	require.Len(t, childPolls, 1)
	require.Equal(t, pollTrace(parent), childPolls[0].Trace)
	require.Nil(t, childPolls[0].MessageTraces, "the child's first message is its parent's, kept in the task's own trace")
	sinkPolls := tr.polls(sink)
	require.Len(t, sinkPolls, 1)
	require.Nil(t, sinkPolls[0].Trace)
	require.Equal(t, []map[string]string{pollTrace(parent)}, sinkPolls[0].MessageTraces)
}

// Without trace contexts, nothing is stored: no trace on tasks, no "trace"
// key in envelopes, none in the hooks' PollInfo.
func TestNoTraceStoredWithoutTracing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	tr := &tracer{plain: true, infos: map[tasks.ID][]executor.PollInfo{}}
	cfg := fastConfig(t)
	cfg.Hooks = tr
	e := executor.MustNew(db, cfg)
	sink, err := tasks.Create(ctx, db, tasks.Spec{Type: "sink", WakeAt: farFuture()})
	require.NoError(t, err)
	executor.Register(e, "parent", executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		if t.State == 0 {
			t.State = 1
			t.Spawn("child", nil, "hello")
			t.Send(sink, "from the parent")
		}
		return executor.Suspend(), nil
	}))
	parent, err := tasks.CreateMany(ctx, db, []tasks.Spec{{Type: "parent", Message: "first"}, {Type: "other", WakeAt: farFuture()}})
	require.NoError(t, err)
	require.NoError(t, inbox.Send(ctx, db, parent[0], tasks.ID{}, "untraced"))
	n, err := e.PollOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	polls := tr.polls(parent[0])
	require.Len(t, polls, 1)
	require.Nil(t, polls[0].Trace)
	require.Nil(t, polls[0].MessageTraces)

	var traced, tasksN, envelopes int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE trace IS NOT NULL), count(*) FROM corotask.tasks`).Scan(&traced, &tasksN))
	require.Zero(t, traced)
	require.Equal(t, 4, tasksN, "sink, parent, other and the child")
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE envelope ? 'trace') FROM corotask.messages`).Scan(&envelopes))
	require.Zero(t, envelopes)
	var total int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.messages`).Scan(&total))
	require.Equal(t, 4, total, "the parent's two (left in its inbox), the child's first and the sink's")
}

// farFuture is a wake time no test waits for: such a task is polled once a
// message wakes it.
func farFuture() time.Time { return time.Now().Add(time.Hour) }
