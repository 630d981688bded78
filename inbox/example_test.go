package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func ExampleSend() {
	ctx := context.Background()
	db, drop := testdb.ForExample() // a pool on a fresh database with the corotask schema
	defer drop()

	// An order that sleeps for an hour, unless a message comes first.
	order, err := tasks.Create(ctx, db, tasks.Spec{Type: "shop.order", WakeAt: time.Now().Add(time.Hour)})
	if err != nil {
		panic(err)
	}
	show := func(when string) {
		task, err := tasks.Get(ctx, db, order)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s, %d message(s)\n", when, task.Status, task.InboxLen)
		for _, m := range task.Inbox {
			// A stored message is an envelope: {"from", "body", "at", ...}.
			var env struct {
				From tasks.ID        `json:"from"`
				Body json.RawMessage `json:"body"`
				At   *time.Time      `json:"at"`
			}
			if err := json.Unmarshal(m, &env); err != nil {
				panic(err)
			}
			fmt.Printf("  %s from outside: %v, stamped: %v\n", env.Body, env.From.IsZero(), env.At != nil)
		}
	}
	show("created")

	// From outside any task (the zero ID): the order wakes at once.
	if err := inbox.Send(ctx, db, order, tasks.ID{}, map[string]any{"approve": true}); err != nil {
		panic(err)
	}
	show("sent")

	// In the caller's transaction, the message is sent only if it commits.
	tx, err := db.Begin(ctx)
	if err != nil {
		panic(err)
	}
	if err := inbox.Send(ctx, tx, order, tasks.ID{}, "never sent"); err != nil {
		panic(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		panic(err)
	}
	show("rolled back")

	// A message is never dropped silently: sending to a task that does not
	// exist (or has ended) fails.
	err = inbox.Send(ctx, db, tasks.NewID(), tasks.ID{}, "hello?")
	fmt.Println("unknown task:", errors.Is(err, tasks.ErrNotFound))
	// Output:
	// created: sleeping, 0 message(s)
	// sent: ready, 1 message(s)
	//   {"approve": true} from outside: true, stamped: true
	// rolled back: ready, 1 message(s)
	//   {"approve": true} from outside: true, stamped: true
	// unknown task: true
}

// A poll takes its messages from the front of its inbox; what it does not
// Pop stays for the next poll. Of makes an Inbox for a test of a poller.
func ExampleInbox_Pop() {
	in := inbox.Of(
		inbox.Message[string]{Body: "first"},
		inbox.Message[string]{Body: "second"},
		inbox.Message[string]{Body: "", Done: true, Err: "canceled"}, // a child's completion
	)
	for {
		m, ok := in.Pop()
		if !ok {
			break
		}
		if m.Done {
			fmt.Printf("a child ended: %q\n", m.Err)
			continue
		}
		fmt.Println("message:", m.Body)
	}
	fmt.Println("left:", in.Len())
	// Output:
	// message: first
	// message: second
	// a child ended: "canceled"
	// left: 0
}
