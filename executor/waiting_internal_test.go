package executor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// A claimed task that finds no free slot waits for one, its claim kept:
// it starts when a slot frees, is forgotten if canceled meanwhile, and is
// given back when the executor stops.
func TestClaimedTaskWaitsForASlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := MustNew(db, Config{Concurrency: 1, Logger: testdb.Logger(t)})
	release := make(chan struct{})
	Register(e, "job", PollerFunc[int, int](func(ctx context.Context, t *Task[int, int]) (Action, error) {
		if t.State == 1 {
			<-release
		}
		return Done(), nil
	}))
	var cs []*claimed
	for i := range 4 {
		id, err := tasks.Create(ctx, db, tasks.Spec{Type: "job", State: i + 1})
		require.NoError(t, err)
		claim := testdb.Claim(t, db, id, 1)
		cs = append(cs, &claimed{id: id, typ: "job", state: []byte(string(rune('1' + i))), claim: claim, attempt: 1, claimedAt: time.Now()})
	}

	// The one slot is taken (by an eager child, say) when the claims return.
	e.slots.open(ctx)
	e.slots.mu.Lock()
	e.slots.polling = 1
	e.slots.mu.Unlock()
	for _, c := range cs {
		require.True(t, e.polls.start(c))
	}
	e.slots.mu.Lock()
	require.Len(t, e.slots.waiting, 4)
	require.Len(t, e.slots.inflight, 4)
	require.Equal(t, 4, e.slots.waitingPerType["job"])
	e.slots.mu.Unlock()
	require.Zero(t, e.claimer.request().total, "waiting tasks go before a new claim")

	e.polls.cancelTask(cs[1].id)
	e.slots.mu.Lock()
	e.slots.inflight[cs[3].id].cancel(ErrRenewTimeout) // as the keeper does
	e.slots.mu.Unlock()
	e.slots.mu.Lock()
	e.slots.polling = 0
	// The first starts (and holds its slot); the second is forgotten, and
	// so is the fourth, whose claim is given back.
	e.polls.startWaiting(e.slots.takeWaiting())
	require.Equal(t, 1, e.slots.polling)
	require.Len(t, e.slots.waiting, 1)
	require.Same(t, cs[2], e.slots.waiting[0].c)
	require.NotContains(t, e.slots.inflight, cs[1].id)
	require.NotContains(t, e.slots.inflight, cs[3].id)
	e.slots.mu.Unlock()

	e.polls.stop() // Run stops
	task, err := tasks.Get(ctx, db, cs[2].id)
	require.NoError(t, err)
	require.NotEqual(t, tasks.StatusRunning, task.Status, "given back")
	e.slots.mu.Lock()
	require.Empty(t, e.slots.waiting)
	require.Zero(t, e.slots.waitingPerType["job"])
	require.NotContains(t, e.slots.inflight, cs[2].id)
	e.slots.mu.Unlock()

	close(release)
	e.polls.wg.Wait()
	task, err = tasks.Get(ctx, db, cs[0].id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status)
	task, err = tasks.Get(ctx, db, cs[3].id)
	require.NoError(t, err)
	require.NotEqual(t, tasks.StatusRunning, task.Status, "given back")
	require.Zero(t, task.Failures)
	e.slots.mu.Lock()
	require.Zero(t, e.slots.polling)
	require.Empty(t, e.slots.inflight)
	e.slots.mu.Unlock()
}
