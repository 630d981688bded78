package executor_test

// The inbox window: a poll is shown the oldest messages of its task's inbox,
// at most its type's InboxWindow, and told when more wait; a poll that pops
// its whole window while more wait is polled again at once, so that a
// backlog is read in order, a window at a time, and a task never ends with
// messages it was not shown.

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// windowPoll is what one poll of a window test saw.
type windowPoll struct {
	shown []int
	more  bool
}

// sendMany sends bodies first, first+1, ... first+n-1 to id, in one
// transaction.
func sendMany(t *testing.T, db *pgxpool.Pool, id tasks.ID, first, n int) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op once committed
	for i := first; i < first+n; i++ {
		require.NoError(t, inbox.Send(ctx, tx, id, tasks.ID{}, i))
	}
	require.NoError(t, tx.Commit(ctx))
}

// windowPoller pops up to pop messages of each poll (all when pop < 0),
// records them and the next one it peeked at, and returns act.
func windowPoller(polls *[]windowPoll, pop int, act func() executor.Action) executor.PollerFunc[[]int, int] {
	return func(ctx context.Context, t *executor.Task[[]int, int]) (executor.Action, error) {
		p := windowPoll{more: t.Inbox.More()}
		for {
			m, ok := t.Inbox.Peek()
			if !ok {
				break
			}
			p.shown = append(p.shown, m.Body)
			if pop >= 0 && len(p.shown) > pop {
				break // shown (peeked), left in the inbox
			}
			t.Inbox.Pop()
			t.State = append(t.State, m.Body)
		}
		*polls = append(*polls, p)
		return act(), nil
	}
}

// pollUntilIdle polls with e until nothing is ready, and returns how many
// polls ran.
func pollUntilIdle(t *testing.T, e *executor.Executor) int {
	t.Helper()
	total := 0
	for {
		n, err := e.PollOnce(context.Background())
		require.NoError(t, err)
		if n == 0 {
			return total
		}
		total += n
	}
}

func TestInboxWindowReadsABacklogInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var polls []windowPoll
	executor.Register(e, "reader", windowPoller(&polls, -1, executor.Suspend), executor.InboxWindow(100))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "reader", WakeAt: farFuture()})
	require.NoError(t, err)
	sendMany(t, db, id, 0, 250)

	require.Equal(t, 3, pollUntilIdle(t, e), "a window of 100, twice polled again at once, then suspended")
	require.Len(t, polls, 3)
	for i, want := range []struct {
		first, n int
		more     bool
	}{{0, 100, true}, {100, 100, true}, {200, 50, false}} {
		require.Len(t, polls[i].shown, want.n, "poll %d", i)
		require.Equal(t, want.first, polls[i].shown[0], "poll %d starts where the last one stopped", i)
		require.Equal(t, want.more, polls[i].more, "poll %d", i)
	}
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusSuspended, task.Status, "the last poll saw the end of the backlog: its Suspend stands")
	require.Zero(t, task.InboxLen)
	var state []int
	require.NoError(t, json.Unmarshal(task.State, &state))
	require.Len(t, state, 250)
	for i, v := range state {
		require.Equal(t, i, v, "every message once, in the order sent")
	}
	var rows int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM corotask.messages WHERE task_id = $1`, id).Scan(&rows))
	require.Zero(t, rows, "popped messages leave the table")
}

// A Done returned while messages the poll was not shown wait does not end
// the task: it reads on, and the poll that has seen everything ends it.
func TestInboxWindowDoneReadsOnFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var polls []windowPoll
	executor.Register(e, "closer", windowPoller(&polls, -1, func() executor.Action { return executor.DoneWith("closed") }),
		executor.InboxWindow(10))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "closer", WakeAt: farFuture()})
	require.NoError(t, err)
	sendMany(t, db, id, 0, 25)

	require.Equal(t, 3, pollUntilIdle(t, e))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status)
	require.JSONEq(t, `"closed"`, string(task.Result))
	var state []int
	require.NoError(t, json.Unmarshal(task.State, &state))
	require.Len(t, state, 25, "ended only once every message was shown")
}

// A poll that leaves messages of its window unpopped chose to: its action
// stands even though more wait, and the next poll starts at the first
// message it left.
func TestInboxWindowUnpoppedKeepsTheAction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var polls []windowPoll
	executor.Register(e, "picky", windowPoller(&polls, 3, executor.Suspend), executor.InboxWindow(5))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "picky", WakeAt: farFuture()})
	require.NoError(t, err)
	sendMany(t, db, id, 0, 8)

	require.Equal(t, 1, pollUntilIdle(t, e))
	require.Equal(t, []int{0, 1, 2, 3}, polls[0].shown)
	require.True(t, polls[0].more)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusSuspended, task.Status)
	require.Equal(t, 5, task.InboxLen)

	// A new message wakes it: the window starts at the first one left.
	sendMany(t, db, id, 8, 1)
	require.Equal(t, 1, pollUntilIdle(t, e))
	require.Equal(t, []int{3, 4, 5, 6}, polls[1].shown)
}

// Messages dropped by an operator leave holes in the seqs: the window skips
// them, and the poll pops exactly what it was shown.
func TestInboxWindowAfterDroppedMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	var polls []windowPoll
	executor.Register(e, "holes", windowPoller(&polls, -1, executor.Suspend), executor.InboxWindow(3))
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "holes", WakeAt: farFuture()})
	require.NoError(t, err)
	sendMany(t, db, id, 0, 7)
	for _, pos := range []int{5, 2, 1} { // bodies 4, 1 and 0
		_, err := tasks.DropMessage(ctx, db, id, pos, testdb.InboxDigest(t, db, id, pos))
		require.NoError(t, err)
	}

	require.Equal(t, 2, pollUntilIdle(t, e))
	require.Equal(t, []int{2, 3, 5}, polls[0].shown)
	require.True(t, polls[0].more)
	require.Equal(t, []int{6}, polls[1].shown)
	require.False(t, polls[1].more)
}

func TestInboxWindowOptionIsChecked(t *testing.T) {
	t.Parallel()
	e := executor.MustNew(testdb.New(t), fastConfig(t))
	for _, n := range []int{-1, executor.MaxInboxWindow + 1} {
		_, err := executor.RegisterSafely(e, "w", executor.PollerFunc[int, int](func(context.Context, *executor.Task[int, int]) (executor.Action, error) {
			return executor.Suspend(), nil
		}), executor.InboxWindow(n))
		require.ErrorContains(t, err, "InboxWindow(")
		require.ErrorContains(t, err, "must be between 1 and 100000")
	}
}

// A parent that awaits many children reads their completions a window at a
// time, all of them, once each.
func TestInboxWindowFanIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))
	const children = 120
	var polls []windowPoll
	executor.Register(e, "leaf", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		return executor.DoneWith(t.State), nil
	}))
	executor.Register(e, "root", executor.PollerFunc[int, int](func(ctx context.Context, t *executor.Task[int, int]) (executor.Action, error) {
		if t.State == 0 {
			for i := 1; i <= children; i++ {
				t.Spawn("leaf", i, nil)
			}
			t.State = -1
			return executor.AwaitChildren(), nil
		}
		p := windowPoll{more: t.Inbox.More()}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			p.shown = append(p.shown, m.Body)
		}
		polls = append(polls, p)
		if t.State -= len(p.shown); t.State == -1-children {
			return executor.Done(), nil
		}
		return executor.AwaitChildren(), nil
	}), executor.InboxWindow(50))
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "root"})
	require.NoError(t, err)
	pollUntilIdle(t, e)

	seen := map[int]int{}
	var sizes []int
	for _, p := range polls {
		sizes = append(sizes, len(p.shown))
		for _, v := range p.shown {
			seen[v]++
		}
	}
	require.Len(t, seen, children, "every completion, by windows of at most 50: %v", sizes)
	for v, n := range seen {
		require.Equal(t, 1, n, "completion of child %d seen once", v)
	}
	for _, n := range sizes {
		require.LessOrEqual(t, n, 50)
	}
}

// A claim whose statement snapshot predates a send it then follows (the
// sender committed between the two) finds fewer message rows than the
// task's inbox_len says, and reads the window again with
// corotask.inbox_window, in a snapshot of its own. That race cannot be timed
// from a test; the function's window is checked here: the oldest messages
// after the popped ones and up to the boundary, at most the limit, in order,
// with their seqs, across holes.
func TestInboxWindowFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "w", WakeAt: farFuture()})
	require.NoError(t, err)
	sendMany(t, db, id, 0, 6)
	_, err = tasks.DropMessage(ctx, db, id, 3, testdb.InboxDigest(t, db, id, 3)) // body 2, seq 3
	require.NoError(t, err)
	for _, c := range []struct {
		after, upto int64
		limit       int
		seqs        []int64
		bodies      []string
	}{
		{0, 6, 100, []int64{1, 2, 4, 5, 6}, []string{"0", "1", "3", "4", "5"}},
		{0, 6, 3, []int64{1, 2, 4}, []string{"0", "1", "3"}},
		{2, 6, 2, []int64{4, 5}, []string{"3", "4"}},
		{1, 4, 100, []int64{2, 4}, []string{"1", "3"}},
		{6, 6, 100, nil, nil},
	} {
		var envelopes [][]byte
		var seqs []int64
		require.NoError(t, db.QueryRow(ctx, `SELECT envelopes, seqs FROM corotask.inbox_window($1, $2, $3, $4)`,
			id, c.after, c.upto, c.limit).Scan(&envelopes, &seqs))
		require.Equal(t, c.seqs, seqs, "after %d, up to %d, limit %d", c.after, c.upto, c.limit)
		var bodies []string
		for _, env := range envelopes {
			var m struct {
				Body json.RawMessage `json:"body"`
			}
			require.NoError(t, json.Unmarshal(env, &m))
			bodies = append(bodies, string(m.Body))
		}
		require.Equal(t, c.bodies, bodies)
	}
}
