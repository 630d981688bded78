package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

const (
	keyLimitType tasks.Type = "bench.keylimit"
	// benchKeySpace is the key space keylimit's type counts its keys in.
	benchKeySpace = "bench.keys"
)

// claimTally is executor hooks that time the claim statements.
type claimTally struct {
	hookChain

	mu sync.Mutex
	// claims counts the claim statements, and took is their total time;
	// hits and hitTook are the same of those that claimed a task or more,
	// which claimed tasks in all.
	claims, hits, tasks int64
	took, hitTook       time.Duration
	failed              int64
}

func (c *claimTally) ClaimDone(ctx context.Context, info *executor.ClaimInfo) {
	c.mu.Lock()
	c.claims++
	c.took += info.Duration
	if info.Err != nil {
		c.failed++
	}
	if info.Claimed > 0 {
		c.hits++
		c.hitTook += info.Duration
		c.tasks += int64(info.Claimed)
	}
	c.mu.Unlock()
	c.hookChain.ClaimDone(ctx, info)
}

// keyRun is what one round of one variant of keylimit measured.
type keyRun struct {
	tasksPerSec float64
	// claimMS is the mean time of the claims that claimed a task or more,
	// claimAllMS that of every claim; perClaim the tasks per such claim.
	claimMS, claimAllMS, perClaim float64
	claims                        int64
	keys                          int
}

// runKeyLimit: N tasks polled once each, without limit keys and with one
// each, of LimitKeys keys of a key space that lets KeyMax tasks of a key
// run at once, alternating for Rounds; tasks/s and the claim statements'
// mean time (executor hooks), and the ratios.
func runKeyLimit(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	res.param("n", o.N)
	res.param("limit_keys", o.LimitKeys)
	res.param("key_max", o.KeyMax)
	res.param("workers", o.Workers)
	res.param("executors", o.Executors)
	res.param("rounds", o.Rounds)
	res.param("pool", o.Pool)
	db, err := r.pool(ctx, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	var tps, claimMS [2][]float64 // by variant: 0 without keys, 1 with them
	for round := 1; round <= o.Rounds; round++ {
		for v, keyed := range []bool{false, true} {
			label := keyVariant(keyed)
			r.progress("round %d/%d, %s: %d tasks", round, o.Rounds, label, o.N)
			run, err := r.keyRound(ctx, db, keyed)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, label, err)
			}
			r.progress("round %d/%d, %s: %.0f tasks/s, claims %.3f ms (%.1f tasks each)",
				round, o.Rounds, label, run.tasksPerSec, run.claimMS, run.perClaim)
			tps[v] = append(tps[v], run.tasksPerSec)
			claimMS[v] = append(claimMS[v], run.claimMS)
			res.Series = append(res.Series, Fields{
				{"round", round}, {"variant", label}, {"tasks_per_sec", run.tasksPerSec}, {"claim_ms", run.claimMS},
				{"claim_all_ms", run.claimAllMS}, {"claims", run.claims}, {"tasks_per_claim", run.perClaim}, {"keys", run.keys},
			})
		}
	}
	res.metric("no_keys_tasks_per_sec", median(tps[0]))
	res.metric("keys_tasks_per_sec", median(tps[1]))
	res.metric("keys_vs_no_keys_tasks_per_sec", median(tps[1])/median(tps[0]))
	res.metric("no_keys_claim_ms", median(claimMS[0]))
	res.metric("keys_claim_ms", median(claimMS[1]))
	res.metric("keys_vs_no_keys_claim_ms", median(claimMS[1])/median(claimMS[0]))
	res.note("claim_ms = mean time of the executors' claim statements that claimed a task or more, round trip included (executor.Hooks ClaimDone); claim_all_ms (series) counts those that found none too; tasks_per_sec = n / (latest done_at - start of the first poll); figures are medians over the rounds")
	res.note("keys: each task has a limit key drawn at random from %d, in a key space of max_running %d that the type names; no_keys: the same tasks, without a key, the type without controls. Each round starts from a TRUNCATEd table, the keys set by one UPDATE in both variants (NULL without keys), then VACUUM FULL and ANALYZE", o.LimitKeys, o.KeyMax)
	return nil
}

func keyVariant(keyed bool) string {
	if keyed {
		return "keys"
	}
	return "no_keys"
}

// keyRound runs one round: a fresh table of N tasks with their keys (or
// none), the key space set (or removed), executors started and stopped
// once every task is done.
func (r *runner) keyRound(ctx context.Context, db *pgxpool.Pool, keyed bool) (keyRun, error) {
	o := r.opts
	var run keyRun
	if _, err := db.Exec(ctx, "TRUNCATE corotask.tasks"); err != nil {
		return run, err
	}
	if err := setKeySpace(ctx, db, keyLimitType, keyed, o.KeyMax); err != nil {
		return run, err
	}
	if _, _, err := r.createTasks(ctx, db, o.N, tasks.Spec{Type: keyLimitType}); err != nil {
		return run, err
	}
	// The same rewrite of every row in both variants, then a compact table.
	if _, err := db.Exec(ctx, `UPDATE corotask.tasks SET limit_key = CASE WHEN $1 THEN 'k' || floor(random() * $2)::int END
		WHERE task_type = $3`, keyed, o.LimitKeys, string(keyLimitType)); err != nil {
		return run, fmt.Errorf("set the limit keys: %w", err)
	}
	if _, err := db.Exec(ctx, "VACUUM FULL corotask.tasks"); err != nil {
		return run, err
	}
	if err := r.analyze(ctx, db); err != nil {
		return run, err
	}
	if err := db.QueryRow(ctx, "SELECT count(DISTINCT limit_key) FROM corotask.tasks").Scan(&run.keys); err != nil {
		return run, err
	}
	tally := &claimTally{}
	cfg := r.executorConfig(0)
	tally.next, cfg.Hooks = cfg.Hooks, tally
	var (
		first firstTime
		polls atomic.Int64
	)
	grp, err := r.startExecutors(ctx, o.Executors, o.Workers, cfg, func(e *executor.Executor) {
		executor.Register(e, keyLimitType, oneshotPoller(&first, &polls), r.typeOptions()...)
	})
	if err != nil {
		return run, err
	}
	defer grp.cleanup()
	timeout := max(2*time.Minute, time.Duration(o.N)*time.Millisecond)
	if err := waitUntil(ctx, "every task done", timeout, 100*time.Millisecond, func() (bool, error) {
		if polls.Load() < int64(o.N) {
			return false, nil
		}
		left, err := anyLive(ctx, db)
		return !left, err
	}); err != nil {
		return run, err
	}
	last, err := latestDone(ctx, db)
	if err != nil {
		return run, err
	}
	if err := grp.stop(); err != nil {
		return run, err
	}
	start := first.get()
	if start.IsZero() {
		return run, fmt.Errorf("no poll started")
	}
	tally.mu.Lock()
	defer tally.mu.Unlock()
	if tally.hits == 0 {
		return run, fmt.Errorf("no claim claimed a task (%d claims, %d failed)", tally.claims, tally.failed)
	}
	run.tasksPerSec = rate(o.N, last.Sub(start))
	run.claimMS = ms(tally.hitTook) / float64(tally.hits)
	run.claimAllMS = ms(tally.took) / float64(tally.claims)
	run.perClaim = float64(tally.tasks) / float64(tally.hits)
	run.claims = tally.claims
	return run, nil
}

// setKeySpace makes typ count its tasks' limit keys in benchKeySpace, of at
// most n running tasks per key, or, when not on, removes the space and
// typ's controls.
func setKeySpace(ctx context.Context, db *pgxpool.Pool, typ tasks.Type, on bool, n int) error {
	var err error
	if on {
		_, err = db.Exec(ctx, `WITH l AS (
				INSERT INTO corotask.key_limits (key_space, max_running) VALUES ($2, $3)
				ON CONFLICT (key_space) DO UPDATE SET max_running = EXCLUDED.max_running
			)
			INSERT INTO corotask.type_controls (task_type, key_space) VALUES ($1, $2)
			ON CONFLICT (task_type) DO UPDATE SET key_space = EXCLUDED.key_space`, string(typ), benchKeySpace, n)
	} else {
		_, err = db.Exec(ctx, `WITH c AS (DELETE FROM corotask.type_controls WHERE task_type = $1)
			DELETE FROM corotask.key_limits WHERE key_space = $2`, string(typ), benchKeySpace)
	}
	if err != nil {
		return fmt.Errorf("set the key space of %s: %w", typ, err)
	}
	return nil
}
