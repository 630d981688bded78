package executor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
)

// approval waits a day for a decision; the deadline of its wait is part of
// its durable state.
type approval struct {
	DecideBy time.Time `json:"decide_by"`
	Outcome  string    `json:"outcome,omitempty"`
}

// A task that waits for a message for at most a day: Receive keeps the
// deadline in the state, so a wake for any other reason (a child's
// completion, a Yield, a crash and a retry) waits on for the same deadline.
func ExampleReceive() {
	poller := executor.PollerFunc[approval, string](
		func(ctx context.Context, t *executor.Task[approval, string]) (executor.Action, error) {
			m, ok, wait := executor.Receive(t, &t.State.DecideBy, 24*time.Hour)
			switch {
			case ok && m.Done:
				return executor.Yield(), nil // a child's end: the wait goes on
			case ok:
				return executor.DoneWith(m.Body), nil
			case wait.IsZero():
				return executor.DoneWith("expired"), nil
			}
			return wait, nil // until the deadline, or a message
		})

	// One poll at a time, as the executor would run them, at the times the
	// database's clock would say.
	ctx := context.Background()
	start := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	res, _ := executor.TryPoll(ctx, poller, executor.TryInput[approval, string]{Now: start})
	fmt.Println(res.Action)
	res, _ = executor.TryPoll(ctx, poller, executor.TryInput[approval, string]{Now: start.Add(time.Hour), State: res.State,
		Messages: []inbox.Message[string]{{Body: "approved"}}})
	fmt.Println(string(res.Result))
	res, _ = executor.TryPoll(ctx, poller, executor.TryInput[approval, string]{Now: start.Add(25 * time.Hour),
		State: approval{DecideBy: start.Add(24 * time.Hour)}})
	fmt.Println(string(res.Result))
	// Output:
	// sleep until 2030-01-02T09:00:00Z
	// "approved"
	// "expired"
}
