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
	e.mu.Lock()
	e.polling = 1
	e.mu.Unlock()
	for _, c := range cs {
		require.True(t, e.start(ctx, c))
	}
	e.mu.Lock()
	require.Len(t, e.waiting, 4)
	require.Len(t, e.inflight, 4)
	require.Equal(t, 4, e.waitingPerType["job"])
	e.mu.Unlock()
	require.Zero(t, e.request().total, "waiting tasks go before a new claim")

	e.cancelTask(cs[1].id)
	e.mu.Lock()
	e.inflight[cs[3].id].cancel(ErrRenewTimeout) // as the keeper does
	e.mu.Unlock()
	e.mu.Lock()
	e.polling = 0
	// The first starts (and holds its slot); the second is forgotten, and
	// so is the fourth, whose claim is given back.
	e.startWaiting(e.takeWaiting())
	require.Equal(t, 1, e.polling)
	require.Len(t, e.waiting, 1)
	require.Same(t, cs[2], e.waiting[0].c)
	require.NotContains(t, e.inflight, cs[1].id)
	require.NotContains(t, e.inflight, cs[3].id)
	e.mu.Unlock()

	e.releaseWaiting() // Run stops
	task, err := tasks.Get(ctx, db, cs[2].id)
	require.NoError(t, err)
	require.NotEqual(t, tasks.StatusRunning, task.Status, "given back")
	e.mu.Lock()
	require.Empty(t, e.waiting)
	require.Zero(t, e.waitingPerType["job"])
	require.NotContains(t, e.inflight, cs[2].id)
	e.mu.Unlock()

	close(release)
	e.polls.Wait()
	task, err = tasks.Get(ctx, db, cs[0].id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status)
	task, err = tasks.Get(ctx, db, cs[3].id)
	require.NoError(t, err)
	require.NotEqual(t, tasks.StatusRunning, task.Status, "given back")
	require.Zero(t, task.Failures)
	e.mu.Lock()
	require.Zero(t, e.polling)
	require.Empty(t, e.inflight)
	e.mu.Unlock()
}
