package tasks_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestCreateGetListRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)

	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	id := tasks.NewID()
	wake := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	got, err := tasks.Create(ctx, db, tasks.Spec{
		ID: id, Type: "child.kind", Parent: parent,
		State: map[string]int{"n": 7}, Message: "hello", WakeAt: wake,
	})
	require.NoError(t, err)
	require.Equal(t, id, got)

	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, id, task.ID)
	require.Equal(t, parent, task.Parent)
	require.Equal(t, tasks.Type("child.kind"), task.Type)
	// A task with a message in its inbox is still asleep until its WakeAt:
	// the message was there from the start, not sent to it later.
	require.Equal(t, tasks.StatusSleeping, task.Status)
	require.JSONEq(t, `{"n":7}`, string(task.State))
	require.Nil(t, task.Result)
	require.NotNil(t, task.WakeAt)
	require.True(t, wake.Equal(*task.WakeAt))
	require.True(t, task.Heartbeat.IsZero())
	require.Equal(t, 1, task.InboxLen)
	require.Equal(t, 0, task.InboxNextLen)
	require.Len(t, task.Inbox, 1)
	require.JSONEq(t, `{"from":"`+parent.UUID()+`","body":"hello"}`, testdb.WithoutSentAt(t, task.Inbox[0]))
	require.Zero(t, task.Failures)
	require.Empty(t, task.LastError)
	require.WithinDuration(t, time.Now(), task.CreatedAt, time.Minute)
	require.Nil(t, task.DoneAt)

	all, err := tasks.List(ctx, db, tasks.Filter{})
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, parent, all[0].ID, "oldest first")
	require.Equal(t, id, all[1].ID)
	require.Nil(t, all[1].Inbox, "List does not load messages")
	require.Equal(t, 1, all[1].InboxLen)

	byType, err := tasks.List(ctx, db, tasks.Filter{Type: "child.kind"})
	require.NoError(t, err)
	require.Len(t, byType, 1)
	require.Equal(t, id, byType[0].ID)

	byParent, err := tasks.List(ctx, db, tasks.Filter{Parent: parent})
	require.NoError(t, err)
	require.Len(t, byParent, 1)

	ready, err := tasks.List(ctx, db, tasks.Filter{Status: tasks.StatusReady})
	require.NoError(t, err)
	require.Len(t, ready, 1)
	require.Equal(t, parent, ready[0].ID)

	page, err := tasks.List(ctx, db, tasks.Filter{Limit: 1})
	require.NoError(t, err)
	require.Len(t, page, 1)
	next, err := tasks.List(ctx, db, tasks.Filter{Limit: 1, After: page[0].ID})
	require.NoError(t, err)
	require.Len(t, next, 1)
	require.Equal(t, id, next[0].ID)

	_, err = tasks.List(ctx, db, tasks.Filter{Status: "zombie"})
	require.ErrorContains(t, err, "invalid status")
}

func TestCreateDuplicateID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	_, err = tasks.Create(ctx, db, tasks.Spec{ID: id, Type: "a"})
	require.ErrorIs(t, err, tasks.ErrExists)
	require.ErrorContains(t, err, id.String())
}

func TestCreateMissingParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	missing := tasks.NewID()
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "a", Parent: missing})
	require.ErrorIs(t, err, tasks.ErrNotFound)
	require.ErrorContains(t, err, "parent")
	require.ErrorContains(t, err, missing.String())
	all, err := tasks.List(ctx, db, tasks.Filter{})
	require.NoError(t, err)
	require.Empty(t, all)
}

func TestCreateUnderEndedParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	require.NoError(t, tasks.Cancel(ctx, db, parent))
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "a", Parent: parent})
	require.ErrorIs(t, err, tasks.ErrEnded)
}

func TestCreateRejectsBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	_, err := tasks.Create(ctx, db, tasks.Spec{Type: ""})
	require.ErrorContains(t, err, "invalid task type")
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "a", State: json.RawMessage(`{"broken"`)})
	require.ErrorContains(t, err, "invalid JSON")
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "a", State: make(chan int)})
	require.ErrorContains(t, err, "state")
	all, err := tasks.List(ctx, db, tasks.Filter{})
	require.NoError(t, err)
	require.Empty(t, all, "nothing is left behind by a failed create")
}

func TestCreateManyIsAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	root := tasks.NewID()
	specs := []tasks.Spec{{ID: root, Type: "root"}}
	for i := 0; i < 500; i++ {
		specs = append(specs, tasks.Spec{Type: "leaf", Parent: root, State: i})
	}
	ids, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	require.Len(t, ids, 501)
	children, err := tasks.List(ctx, db, tasks.Filter{Parent: root, Limit: 1000})
	require.NoError(t, err)
	require.Len(t, children, 500)

	dup := []tasks.Spec{{Type: "x"}, {ID: root, Type: "x"}}
	_, err = tasks.CreateMany(ctx, db, dup)
	require.ErrorIs(t, err, tasks.ErrExists)
	xs, err := tasks.List(ctx, db, tasks.Filter{Type: "x"})
	require.NoError(t, err)
	require.Empty(t, xs)
}

func TestCreateInCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	id, err := tasks.Create(ctx, tx, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	_, err = tasks.Get(ctx, db, id)
	require.ErrorIs(t, err, tasks.ErrNotFound)

	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := tasks.Create(ctx, tx, tasks.Spec{ID: id, Type: "a"})
		return err
	})
	require.NoError(t, err)
	_, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
}

func TestGetUnknown(t *testing.T) {
	t.Parallel()
	db := testdb.Tx(t)
	id := tasks.NewID()
	_, err := tasks.Get(context.Background(), db, id)
	require.ErrorIs(t, err, tasks.ErrNotFound)
	require.ErrorContains(t, err, id.String())
}

func TestCancelSubtree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	grand, err := tasks.Create(ctx, db, tasks.Spec{Type: "grandparent"})
	require.NoError(t, err)
	parent, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent", Parent: grand})
	require.NoError(t, err)
	var kids []tasks.ID
	for i := 0; i < 3; i++ {
		k, err := tasks.Create(ctx, db, tasks.Spec{Type: "kid", Parent: parent})
		require.NoError(t, err)
		kids = append(kids, k)
	}
	leaf, err := tasks.Create(ctx, db, tasks.Spec{Type: "leaf", Parent: kids[0]})
	require.NoError(t, err)
	sibling, err := tasks.Create(ctx, db, tasks.Spec{Type: "sibling", Parent: grand})
	require.NoError(t, err)
	// A running descendant is canceled too, and its claim is cleared.
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET heartbeat = now(), claim = gen_random_uuid() WHERE task_id = $1`, kids[1])
	require.NoError(t, err)

	n, err := tasks.CancelCount(ctx, db, parent)
	require.NoError(t, err)
	require.Equal(t, 5, n, "the task, its three children and a grandchild")

	for _, id := range append([]tasks.ID{parent, leaf}, kids...) {
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		require.Equal(t, tasks.StatusCanceled, task.Status, id)
		require.NotNil(t, task.DoneAt)
		require.Nil(t, task.WakeAt)
		require.True(t, task.Heartbeat.IsZero())
	}
	s, err := tasks.Get(ctx, db, sibling)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusReady, s.Status, "outside the subtree")

	// The grandparent gets exactly one completion message: from the canceled
	// subtree's root, not from its descendants (whose parents ended too).
	g, err := tasks.Get(ctx, db, grand)
	require.NoError(t, err)
	require.Len(t, g.Inbox, 1)
	require.JSONEq(t, `{"from":"`+parent.UUID()+`","body":null,"done":true,"err":"canceled"}`, testdb.WithoutSentAt(t, g.Inbox[0]))

	require.ErrorIs(t, tasks.Cancel(ctx, db, parent), tasks.ErrEnded)
	n, err = tasks.CancelCount(ctx, db, parent)
	require.ErrorIs(t, err, tasks.ErrEnded)
	require.Zero(t, n)
	require.ErrorIs(t, tasks.Cancel(ctx, db, tasks.NewID()), tasks.ErrNotFound)
}

func TestCancelNotifiesRunningPolls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET heartbeat = now(), claim = gen_random_uuid() WHERE task_id = $1`, id)
	require.NoError(t, err)

	listener, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer listener.Close(ctx)
	_, err = listener.Exec(ctx, "LISTEN corotask_cancel")
	require.NoError(t, err)

	require.NoError(t, tasks.Cancel(ctx, db, id))
	wctx, cancel := context.WithTimeout(ctx, testdb.Patience)
	defer cancel()
	n, err := listener.WaitForNotification(wctx)
	require.NoError(t, err)
	got, err := tasks.ParseID(n.Payload)
	require.NoError(t, err)
	require.Equal(t, id, got)
}

func TestStatuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	ready, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	sleeping, err := tasks.Create(ctx, db, tasks.Spec{Type: "a", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	suspended, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	running, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET wake_at = NULL WHERE task_id = $1`, suspended)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE corotask.tasks SET heartbeat = now(), claim = gen_random_uuid() WHERE task_id = $1`, running)
	require.NoError(t, err)
	want := map[tasks.ID]tasks.Status{ready: tasks.StatusReady, sleeping: tasks.StatusSleeping, suspended: tasks.StatusSuspended, running: tasks.StatusRunning}
	for id, st := range want {
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		require.Equal(t, st, task.Status)
		list, err := tasks.List(ctx, db, tasks.Filter{Status: st})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, id, list[0].ID)
	}
}

// A cancel that races with the creation of children under several parents
// waits for it, and cancels the new children too.
func TestCancelWaitsForChildrenBeingCreated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t) // a second session must see its commits
	p1, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)
	p2, err := tasks.Create(ctx, db, tasks.Spec{Type: "parent"})
	require.NoError(t, err)

	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op once committed
	kids, err := tasks.CreateMany(ctx, tx, []tasks.Spec{{Type: "kid", Parent: p1}, {Type: "kid", Parent: p2}})
	require.NoError(t, err)

	canceled := make(chan error, 1)
	go func() { canceled <- tasks.Cancel(ctx, db, p2) }()
	testdb.WaitForLockWait(t, db)
	select {
	case err := <-canceled:
		t.Fatalf("cancel of the second parent did not wait for its child's creation: %v", err)
	default:
	}
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-canceled)
	kid, err := tasks.Get(ctx, db, kids[1])
	require.NoError(t, err)
	require.Equal(t, tasks.StatusCanceled, kid.Status)
	kid, err = tasks.Get(ctx, db, kids[0])
	require.NoError(t, err)
	require.Equal(t, tasks.StatusReady, kid.Status)
}

func TestZeroIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Tx(t)
	require.ErrorContains(t, tasks.Cancel(ctx, db, tasks.ID{}), "zero id")
}

// A task that becomes ready is announced on corotask_ready with its type, so
// executors need not poll; one that is not ready is not.
func TestReadyTasksAreAnnounced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	next := testdb.Listen(t, url, "corotask_ready")

	_, err := tasks.Create(ctx, db, tasks.Spec{Type: "later", WakeAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	_, err = tasks.Create(ctx, db, tasks.Spec{Type: "now"})
	require.NoError(t, err)
	require.Equal(t, "now", next(), "the sleeping task was not announced")

	// Waking the sleeping task with a message announces it.
	later, err := tasks.List(ctx, db, tasks.Filter{Type: "later"})
	require.NoError(t, err)
	_, err = db.Exec(ctx, "SELECT corotask.send_to_task($1, NULL, '1')", later[0].ID)
	require.NoError(t, err)
	require.Equal(t, "later", next())
}

func TestWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t) // a second session must see its commits
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "a"})
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = tasks.Wait(short, db, id)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	waited := make(chan *tasks.Task, 1)
	go func() {
		task, err := tasks.Wait(ctx, db, id)
		require.NoError(t, err)
		waited <- task
	}()
	require.NoError(t, tasks.Cancel(ctx, db, id))
	task := <-waited
	require.Equal(t, tasks.StatusCanceled, task.Status)

	_, err = tasks.Wait(ctx, db, tasks.NewID())
	require.ErrorIs(t, err, tasks.ErrNotFound)
}

func TestHistoryEntryNumber(t *testing.T) {
	t.Parallel()
	require.Equal(t, "3", tasks.HistoryEntry{Attempt: 3}.Number())
	require.Equal(t, "3.1", tasks.HistoryEntry{Attempt: 3, Seq: 1}.Number())
	require.Equal(t, "0.12", tasks.HistoryEntry{Seq: 12}.Number())
}
