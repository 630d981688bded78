package executor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// The executor holds at most claimsPerSlot×Concurrency claims: polls whose
// outcome waits for its batch to commit (settling) leave their slots to new
// claims, up to that bound and no further.
func TestClaimsHeldAreBounded(t *testing.T) {
	t.Parallel()
	e := MustNew(testdb.New(t), Config{Concurrency: 2, Logger: testdb.Logger(t)})
	Register(e, "job", PollerFunc[int, int](func(context.Context, *Task[int, int]) (Action, error) {
		return Done(), nil
	}))
	settle := func(n int) {
		e.slots.mu.Lock()
		defer e.slots.mu.Unlock()
		for range n {
			e.slots.inflight[tasks.NewID()] = &flight{settling: true}
		}
	}
	require.Equal(t, 2, e.claimer.request().total, "nothing held: every slot")

	settle(claimsPerSlot*2 - 3)
	require.Equal(t, 2, e.claimer.request().total, "settling polls hold no slot")

	settle(2)
	require.Equal(t, 1, e.claimer.request().total, "one claim short of the bound")

	e.slots.mu.Lock()
	e.slots.reserved = 1 // a child's slot, reserved for a batch in flight
	e.slots.mu.Unlock()
	require.Zero(t, e.claimer.request().total, "at the bound")

	e.slots.mu.Lock()
	e.slots.reserved = 0
	e.slots.inflight = map[tasks.ID]*flight{}
	e.slots.polling = 2
	e.slots.mu.Unlock()
	require.Zero(t, e.claimer.request().total, "every slot polling, whatever the room for claims")
}
