package bench

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// backlogEvery is how often the pressure scenario samples its backlog.
	backlogEvery = 250 * time.Millisecond
	// backlogSampleTimeout bounds one sample: a session killed or stalled
	// costs that sample, not the next ones.
	backlogSampleTimeout = 5 * time.Second
	// backlogTries is how many times a sample is tried, each on a new
	// session when the last was killed.
	backlogTries = 3
)

// backlogSample is the number of tasks created and not done yet, at a time.
type backlogSample struct {
	at time.Time
	n  int64
}

// backlogSampler counts the live tasks (created and committed, not done)
// every backlogEvery until stopped. A sample that fails (its session
// killed) is tried again at once, on a new session the pool opens; one that
// fails backlogTries times is counted and skipped.
type backlogSampler struct {
	db      *pgxpool.Pool
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples []backlogSample
	failed  int
	stopped bool
}

func startBacklogSampler(ctx context.Context, r *runner) (*backlogSampler, error) {
	db, err := r.pool(ctx, 1)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &backlogSampler{db: db, cancel: cancel, done: make(chan struct{})}
	go s.loop(ctx)
	return s, nil
}

func (s *backlogSampler) loop(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(backlogEvery)
	defer tick.Stop()
	for {
		var (
			at  time.Time
			n   int64
			err error
		)
		for range backlogTries {
			sctx, cancel := context.WithTimeout(ctx, backlogSampleTimeout)
			at = time.Now()
			n, err = countBacklog(sctx, s.db)
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
		}
		s.mu.Lock()
		if err == nil {
			s.samples = append(s.samples, backlogSample{at: at, n: n})
		} else if ctx.Err() == nil {
			s.failed++
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// countBacklog counts the live tasks through the partial indexes of the
// claim (ready: tasks_ready_idx; claimed: tasks_running_idx), so that a
// sample does not read the whole table; no task of the scenario is ever
// suspended.
func countBacklog(ctx context.Context, db *pgxpool.Pool) (int64, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		return 0, err
	}
	var n int64
	err = tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM corotask.tasks WHERE claim IS NULL AND done_at IS NULL AND wake_at IS NOT NULL)
		+ (SELECT count(*) FROM corotask.tasks WHERE claim IS NOT NULL)`).Scan(&n)
	return n, err
}

// latest returns the last sample taken, if any.
func (s *backlogSampler) latest() (backlogSample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return backlogSample{}, false
	}
	return s.samples[len(s.samples)-1], true
}

// stop stops sampling and returns the samples and the number that failed.
// Calling it again returns the same.
func (s *backlogSampler) stop() ([]backlogSample, int) {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		s.db.Close()
	}
	return s.samples, s.failed
}
