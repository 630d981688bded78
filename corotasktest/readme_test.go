package corotasktest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
)

type cart struct{ Items []string }

type cartMsg struct {
	Add      string
	Checkout bool
}

// pollCart adds items until checkout, then ends with them.
func pollCart(ctx context.Context, t *executor.Task[cart, cartMsg]) (executor.Action, error) {
	for m, ok := t.Inbox.Pop(); ok; m, ok = t.Inbox.Pop() {
		if m.Body.Checkout {
			return executor.DoneWith(t.State.Items), nil
		}
		t.State.Items = append(t.State.Items, m.Body.Add)
	}
	return executor.Suspend(), nil
}

// One poll, as the executor would run it; nothing committed, no database.
func TestCartPoll(t *testing.T) {
	t.Parallel()
	res, err := executor.TryPoll(context.Background(), executor.PollerFunc[cart, cartMsg](pollCart),
		executor.TryInput[cart, cartMsg]{
			State:    cart{Items: []string{"tea"}},
			Messages: []inbox.Message[cartMsg]{{Body: cartMsg{Add: "milk"}}},
		})
	require.NoError(t, err)
	require.Equal(t, executor.Suspend(), res.Action)
	require.Equal(t, []string{"tea", "milk"}, res.State.Items)
	require.Equal(t, 1, res.Popped)
}

// The whole workflow on a database of the test's own, every poll committed.
func TestCartWorkflow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := corotasktest.NewDB(t) // dropped when the test ends
	e := executor.MustNew(db, executor.Config{Logger: corotasktest.Logger(t)})
	carts := executor.Register(e, "shop.cart", executor.PollerFunc[cart, cartMsg](pollCart))

	id, err := carts.Create(ctx, db, cart{})
	require.NoError(t, err)
	require.NoError(t, carts.Send(ctx, db, id, cartMsg{Add: "tea"}))
	require.NoError(t, carts.Send(ctx, db, id, cartMsg{Checkout: true}))
	_, err = corotasktest.RunUntilIdle(ctx, e) // poll until nothing is ready
	require.NoError(t, err)
	require.Equal(t, []string{"tea"}, corotasktest.Result[[]string](t, db, id))
}
