package executor

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// retentionBatch is how many ended tasks one DELETE removes, keeping each
// statement short.
const retentionBatch = 1000

// retention deletes ended tasks in its own goroutine (a service of Run's,
// when Config.Retention is set); it owns nothing.
type retention struct{ *env }

// run deletes tasks that ended more than Retention ago, every
// RetentionInterval. Several executors may do it at once: SKIP LOCKED keeps
// them from waiting on each other.
func (r retention) run(ctx context.Context) {
	every(ctx, r.cfg.RetentionInterval, func(ctx context.Context) bool {
		n, err := r.deleteExpired(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("corotask: delete expired tasks", "error", err)
		} else if n > 0 {
			r.log.Debug("corotask: deleted expired tasks", "tasks", n)
		}
		return true
	})
}

// DeleteExpired deletes tasks that ended more than Config.Retention ago, in
// batches, and returns how many it deleted. Run calls it every
// RetentionInterval; it is exported for operators' scripts and tests.
//
// A task's history and the messages left in its inbox are deleted with it,
// in the same statement.
//
// A task's record stays while it has children (of any status): leaves go
// first, their parents at a later pass. Cancel then always reaches every live
// descendant of a task through the records of its ended ones.
func (e *Executor) DeleteExpired(ctx context.Context) (int, error) {
	defer e.env.distribution.done()
	return retention{e.env}.deleteExpired(ctx)
}

// deleteExpired is DeleteExpired.
func (r retention) deleteExpired(ctx context.Context) (int, error) {
	if r.cfg.Retention < 0 {
		return 0, nil
	}
	citus, err := r.distribution.known(ctx, r.pool)
	if err != nil {
		return 0, err
	}
	total := 0
	for range 100 {
		var n int
		var err error
		if citus {
			n, err = r.deleteExpiredShards(ctx)
		} else {
			err = r.pool.QueryRow(ctx, query.RetentionDelete, r.cfg.Retention.Seconds(), retentionBatch).Scan(&n)
		}
		if err != nil {
			return total, err
		}
		total += n
		// A pass that deleted leaves may have left their parents deletable.
		if n == 0 {
			break
		}
	}
	return total, nil
}

// shardRoot is a root of a tree on a shard, and the shard.
type shardRoot struct {
	Shard int64
	Root  tasks.ID
}

// deleteExpiredShards is one pass of deleteExpired on a distributed
// database: RetentionDelete runs on each shard that holds expired tasks, as
// the claim does (see claimShards), through the claims' connections.
func (r retention) deleteExpiredShards(ctx context.Context) (int, error) {
	pool, err := r.distribution.pool(ctx, r.pool)
	if err != nil {
		return 0, err
	}
	rows, err := pool.Query(ctx, query.CitusShardsToClean, r.cfg.Retention.Seconds(), retentionBatch)
	if err != nil {
		return 0, err
	}
	roots, err := pgx.CollectRows(rows, pgx.RowToStructByPos[shardRoot])
	if err != nil {
		return 0, err
	}
	total := 0
	for _, s := range roots {
		var n int
		if err := pool.QueryRow(ctx, query.RetentionShard, s.Root, r.cfg.Retention.Seconds(), retentionBatch).Scan(&n); err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}
