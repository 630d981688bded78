package executor_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

type orderState struct {
	Items []string `json:"items"`
	Paid  int      `json:"paid"`
}

type orderMsg struct {
	Paid int `json:"paid"`
}

type receiptState struct {
	Total int `json:"total"`
}

// Handles are package-level values in an application; here, per test.
func TestHandlesCreateSpawnAndSendTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	e := executor.MustNew(db, fastConfig(t))

	receipts := executor.NewHandle[receiptState, string]("shop.receipt")
	orders := executor.Register(e, "shop.order", executor.PollerFunc[orderState, orderMsg](
		func(ctx context.Context, tk *executor.Task[orderState, orderMsg]) (executor.Action, error) {
			for {
				m, ok := tk.Inbox.Pop()
				if !ok {
					break
				}
				if m.Done { // the receipt ended
					return executor.DoneWith(tk.State.Paid), nil
				}
				tk.State.Paid += m.Body.Paid
			}
			if tk.State.Paid >= 10 {
				receipts.SpawnWith(tk, receiptState{Total: tk.State.Paid}, "print")
			}
			return executor.Suspend(), nil
		}))
	require.Equal(t, tasks.Type("shop.order"), orders.Type())
	executor.Register(e, receipts.Type(), executor.PollerFunc[receiptState, string](
		func(ctx context.Context, tk *executor.Task[receiptState, string]) (executor.Action, error) {
			m, ok := tk.Inbox.Pop()
			require.True(t, ok)
			require.Equal(t, "print", m.Body)
			return executor.Done(), nil // the order's completion message has a null body
		}))

	id, err := orders.Create(ctx, db, orderState{Items: []string{"tea"}})
	require.NoError(t, err)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.Type("shop.order"), task.Type)
	require.JSONEq(t, `{"items":["tea"],"paid":0}`, string(task.State))

	require.NoError(t, orders.Send(ctx, db, id, orderMsg{Paid: 4}))
	require.NoError(t, orders.Send(ctx, db, id, orderMsg{Paid: 6}))
	for range 4 { // order polls and spawns, receipt ends, order ends
		_, err := e.PollOnce(ctx)
		require.NoError(t, err)
	}
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, "done", string(task.Status))
	require.JSONEq(t, `10`, string(task.Result))

	children, err := tasks.List(ctx, db, tasks.Filter{Parent: id})
	require.NoError(t, err)
	require.Len(t, children, 1)
	require.Equal(t, receipts.Type(), children[0].Type)
	var r receiptState
	require.NoError(t, json.Unmarshal(children[0].State, &r))
	require.Equal(t, 10, r.Total)
}

func TestHandleCreateAtWithMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	h := executor.NewHandle[int, string]("handle.later")
	msg := "hello"
	at := time.Now().Add(time.Hour)
	id, err := h.CreateAt(ctx, db, 7, &msg, at)
	require.NoError(t, err)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, "sleeping", string(task.Status))
	require.Equal(t, 1, task.InboxLen)
	require.JSONEq(t, `7`, string(task.State))
	require.WithinDuration(t, at, *task.WakeAt, time.Millisecond)
}

func TestNewHandleRefusesAnInvalidType(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { executor.NewHandle[int, int]("") })
}
