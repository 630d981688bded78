package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/tasks"
)

const (
	// produceEvery is the producer's tick: each creates the tasks due by
	// then, in one CreateMany.
	produceEvery = 10 * time.Millisecond
	// produceBatchMax bounds one CreateMany when the producer catches up
	// after a slow one.
	produceBatchMax = 2_000
	// createRetryFor bounds the retries of one batch.
	createRetryFor = 2 * time.Minute
)

// producer creates tasks at a fixed rate, in small batches, whatever
// happens to its connections: a batch that fails is retried with the same
// task IDs until it is known committed, so that no task is lost or created
// twice.
type producer struct {
	db   *pgxpool.Pool
	rate int
	// created is how many tasks are committed: the next task's number.
	created atomic.Int64
	// retries counts the failed CreateMany calls; ambiguous, those that
	// had committed all the same (their retry found the IDs taken).
	retries, ambiguous atomic.Int64
	done               chan error
}

func startProducer(ctx context.Context, r *runner) (*producer, error) {
	db, err := r.pool(ctx, 2)
	if err != nil {
		return nil, err
	}
	return &producer{db: db, rate: r.opts.Rate, done: make(chan error, 1)}, nil
}

// run starts producing: Rate tasks a second from ph.start until ph.stop.
func (p *producer) run(ctx context.Context, ph phases) {
	go func() { p.done <- p.loop(ctx, ph) }()
}

// wait waits until the producer has stopped, its last batch committed.
func (p *producer) wait() error { return <-p.done }

func (p *producer) close() { p.db.Close() }

func (p *producer) loop(ctx context.Context, ph phases) error {
	tick := time.NewTicker(produceEvery)
	defer tick.Stop()
	for {
		now := time.Now()
		end := !now.Before(ph.stop)
		if end {
			now = ph.stop // the last batch: what was due by then
		}
		seq := p.created.Load()
		due := int64(float64(p.rate)*now.Sub(ph.start).Seconds()) - seq
		if n := min(due, produceBatchMax); n > 0 {
			batch := make([]tasks.Spec, n)
			for i := range batch {
				batch[i] = tasks.Spec{ID: tasks.NewID(), Type: pressureType, State: pressureState{Seq: seq + int64(i)}}
			}
			if err := p.create(ctx, batch); err != nil {
				return err
			}
			p.created.Add(n)
		}
		if end {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// create creates batch, retrying until it is committed. CreateMany
// commits all of a batch or none of it, so a retry that finds the IDs
// taken (ErrExists) means an earlier attempt, whose reply was lost with its
// connection, had committed it.
func (p *producer) create(ctx context.Context, batch []tasks.Spec) error {
	deadline := time.Now().Add(createRetryFor)
	for attempt := 0; ; attempt++ {
		_, err := tasks.CreateMany(ctx, p.db, batch)
		switch {
		case err == nil:
			return nil
		case attempt > 0 && errors.Is(err, tasks.ErrExists):
			p.ambiguous.Add(1)
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("create %d tasks: still failing after %s: %w", len(batch), createRetryFor, err)
		}
		p.retries.Add(1)
		if err := sleepUntil(ctx, time.Now().Add(produceEvery)); err != nil {
			return err
		}
	}
}
