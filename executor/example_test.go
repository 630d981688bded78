package executor_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// cart is the durable state of a shop.cart task.
type cart struct {
	Items []string `json:"items"`
}

// cartMessage is what shop.cart tasks receive.
type cartMessage struct {
	Add      string `json:"add,omitempty"`
	Checkout bool   `json:"checkout,omitempty"`
}

// cartPoller is a typed poller: its tasks' state decodes into cart, their
// messages into cartMessage.
type cartPoller struct{}

func (cartPoller) Poll(ctx context.Context, t *executor.Task[cart, cartMessage]) (executor.Action, error) {
	for {
		m, ok := t.Inbox.Pop()
		if !ok {
			return executor.Suspend(), nil // until the next message
		}
		if m.Body.Checkout {
			return executor.DoneWith(t.State.Items), nil
		}
		t.State.Items = append(t.State.Items, m.Body.Add)
	}
}

func ExampleRegister() {
	ctx := context.Background()
	db, drop := testdb.ForExample() // a pool on a fresh database with the corotask schema
	defer drop()

	e := executor.MustNew(db, executor.Config{Logger: slog.New(slog.DiscardHandler)})
	// The state and message types, cart and cartMessage, are inferred from
	// cartPoller's Poll method.
	executor.Register(e, "shop.cart", cartPoller{})

	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "shop.cart"})
	if err != nil {
		panic(err)
	}
	for _, m := range []cartMessage{{Add: "tea"}, {Add: "milk"}, {Checkout: true}} {
		if err := inbox.Send(ctx, db, id, tasks.ID{}, m); err != nil {
			panic(err)
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- e.Run(runCtx) }()
	task := must(tasks.Wait(context.Background(), db, id))
	stop()
	if err := <-ran; err != nil {
		panic(err)
	}
	fmt.Println(task.Status, string(task.Result))
	// Output: done ["tea", "milk"]
}

// A parent spawns one child per number; each child squares its number and
// ends with the square. The parent sums the squares as the children's
// completion messages arrive, and ends when it has them all.
func Example_spawnAndFanIn() {
	ctx := context.Background()
	db, drop := testdb.ForExample()
	defer drop()

	type sumState struct {
		Numbers []int
		Pending int // children that have not ended
		Sum     int
	}
	sum := executor.PollerFunc[sumState, int](func(ctx context.Context, t *executor.Task[sumState, int]) (executor.Action, error) {
		s := &t.State
		if s.Numbers != nil {
			// Fan out: the children are created when this poll commits.
			for _, n := range s.Numbers {
				t.Spawn("squares.square", n, nil)
			}
			s.Pending, s.Numbers = len(s.Numbers), nil
			return executor.Suspend(), nil
		}
		// Fan in: one completion message per child, in the order they end.
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			if !m.Done {
				continue // only the children's completions count
			}
			if m.Err != "" { // the child failed or was canceled
				return executor.Action{}, fmt.Errorf("child %s: %s", m.From, m.Err)
			}
			s.Sum += m.Body // the child's result
			s.Pending--
		}
		if s.Pending > 0 {
			return executor.Suspend(), nil
		}
		return executor.DoneWith(s.Sum), nil
	})
	square := executor.PollerFunc[int, any](func(ctx context.Context, t *executor.Task[int, any]) (executor.Action, error) {
		return executor.DoneWith(t.State * t.State), nil
	})

	e := executor.MustNew(db, executor.Config{Logger: slog.New(slog.DiscardHandler)})
	executor.Register(e, "squares.sum", sum)
	executor.Register(e, "squares.square", square)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- e.Run(runCtx) }()

	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "squares.sum", State: sumState{Numbers: []int{1, 2, 3, 4}}})
	if err != nil {
		panic(err)
	}
	task := must(tasks.Wait(context.Background(), db, root))
	stop()
	if err := <-ran; err != nil {
		panic(err)
	}
	children, err := tasks.List(ctx, db, tasks.Filter{Parent: root})
	if err != nil {
		panic(err)
	}
	fmt.Println("sum of squares:", task.Status, string(task.Result))
	// Children created by one poll have IDs in no particular order.
	slices.SortFunc(children, func(a, b *tasks.Task) int { return bytes.Compare(a.State, b.State) })
	for _, c := range children {
		fmt.Println("child:", c.Type, string(c.State), c.Status, string(c.Result))
	}
	// Output:
	// sum of squares: done 30
	// child: squares.square 1 done 1
	// child: squares.square 2 done 4
	// child: squares.square 3 done 9
	// child: squares.square 4 done 16
}

// PollOnce claims, polls and commits what is ready, once, with no background
// loop: a test steps a poller through its life and checks the task after
// each step.
func ExampleExecutor_PollOnce() {
	ctx := context.Background()
	db, drop := testdb.ForExample()
	defer drop()

	// The poller under test counts "ping" messages, and ends with the count
	// at "stop".
	counter := executor.PollerFunc[int, string](func(ctx context.Context, t *executor.Task[int, string]) (executor.Action, error) {
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				return executor.Suspend(), nil
			}
			if m.Body == "stop" {
				return executor.DoneWith(t.State), nil
			}
			t.State++
		}
	})
	e := executor.MustNew(db, executor.Config{Logger: slog.New(slog.DiscardHandler)})
	executor.Register(e, "example.counter", counter)

	id, err := tasks.Create(ctx, db, tasks.Spec{Type: "example.counter"})
	if err != nil {
		panic(err)
	}
	step := func(what string) {
		n, err := e.PollOnce(ctx)
		if err != nil {
			panic(err)
		}
		task, err := tasks.Get(ctx, db, id)
		if err != nil {
			panic(err)
		}
		line := fmt.Sprintf("%-12s polled %d: %s, state %s", what, n, task.Status, task.State)
		if task.Status == tasks.StatusDone {
			line += ", result " + string(task.Result)
		}
		fmt.Println(line)
	}
	send := func(body string) {
		if err := inbox.Send(ctx, db, id, tasks.ID{}, body); err != nil {
			panic(err)
		}
	}

	step("created:")
	send("ping")
	send("ping")
	step("two pings:")
	step("nothing new:")
	send("stop")
	step("stop:")
	// Output:
	// created:     polled 1: suspended, state 0
	// two pings:   polled 1: suspended, state 2
	// nothing new: polled 0: suspended, state 2
	// stop:        polled 1: done, state 2, result 2
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
