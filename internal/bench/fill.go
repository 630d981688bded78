package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

const fillType tasks.Type = "bench.fill"

// fillChunk is how many messages one filler poll sends at most, so that its
// effects (one JSON document in the commit) stay a few hundred kB.
const fillChunk = 10_000

// note is the small message the inbox scenarios send.
type note struct {
	Seq int `json:"seq"`
}

// fillOrder is a filler task's state: send Count notes to To, numbered
// from First.
type fillOrder struct {
	To    tasks.ID `json:"to"`
	First int      `json:"first"`
	Count int      `json:"count"`
}

// filler fills a task's inbox through the public API at the lowest cost it
// offers: a task of its own whose one poll sends the messages (Task.Send),
// delivered by the poll's commit in one statement. Sends one at a time
// would cost one statement each, and on a schema that keeps the inbox as an
// array in the task's row each would rewrite the whole array: quadratic.
type filler struct {
	db   *pgxpool.Pool
	ex   *executor.Executor
	sent int // notes sent so far, for their numbers
}

// newFiller makes a filler on db, whose executor polls filler tasks only
// (with PollOnce: nothing runs in the background).
func (r *runner) newFiller(db *pgxpool.Pool) *filler {
	ex := executor.MustNew(db, r.executorConfig(1))
	executor.Register(ex, fillType, executor.PollerFunc[fillOrder, struct{}](
		func(ctx context.Context, t *executor.Task[fillOrder, struct{}]) (executor.Action, error) {
			for i := range t.State.Count {
				t.Send(t.State.To, note{Seq: t.State.First + i})
			}
			return executor.Done(), nil
		}), r.typeOptions()...)
	return &filler{db: db, ex: ex}
}

// fill sends n notes to task to, fillChunk per filler poll; each commit
// wakes to if it is asleep or suspended.
func (f *filler) fill(ctx context.Context, to tasks.ID, n int) error {
	for n > 0 {
		c := min(n, fillChunk)
		if _, err := tasks.Create(ctx, f.db, tasks.Spec{Type: fillType, State: fillOrder{To: to, First: f.sent, Count: c}}); err != nil {
			return fmt.Errorf("fill %s: %w", to, err)
		}
		polled, err := f.ex.PollOnce(ctx)
		if err != nil {
			return fmt.Errorf("fill %s: %w", to, err)
		}
		if polled != 1 {
			return fmt.Errorf("fill %s: the filler's PollOnce polled %d tasks, want 1", to, polled)
		}
		f.sent += c
		n -= c
	}
	return nil
}
