package faults

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

// KeySpaceTree is the workload's key space: the nodes and doomed tasks of a
// tree carry their root's ID (its UUID form) as their limit key, so that at
// most Config.TreeKeyLimit of them run at once per tree.
const KeySpaceTree = "fault.tree"

// treeTypes are the types that count in KeySpaceTree.
var treeTypes = []tasks.Type{TypeNode, TypeDoomed}

// SetLimits sets the workload's flow-control limits in db: at most nodeMax
// polls of TypeNode run at once, fleet-wide, and at most keyMax tasks of one
// tree (TypeNode and TypeDoomed) in KeySpaceTree. The types are accepted
// before any executor has registered them.
func SetLimits(ctx context.Context, db tasks.DB, nodeMax, keyMax int) error {
	if err := tasks.SetMaxRunning(ctx, db, TypeNode, nodeMax, tasks.AllowNewType()); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	if err := tasks.SetKeyLimit(ctx, db, KeySpaceTree, keyMax, treeTypes, tasks.AllowNewType()); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	return nil
}

// LimitSample is one reading of the running claims that the limits count,
// all from one statement, so of one instant.
type LimitSample struct {
	Node       int    // unexpired claims of TypeNode
	Uncounted  int    // among them, claims not marked as counting toward the maximum
	Key        int    // unexpired claims of the busiest limit key of KeySpaceTree
	KeyName    string // that key ("" when none runs)
	NodeWaits  int    // ready TypeNode tasks that no executor holds
	SampleTime string // the server's time of the reading
}

// sampleSQL counts, in one snapshot, the running claims as the limits count
// them: a claim that has not expired (claim_expires_at >= corotask.now()).
// An expired claim no longer counts, whether or not its poll still runs: a
// stalled executor's poll may go on after its claim expired, and its task
// be taken over meanwhile (a documented non-guarantee of flow control, see
// docs/flow-control.md). The sampler therefore counts unexpired claims only;
// it counts them whether or not the claim marked itself counted, so that a
// claim that escaped the count shows up too.
const sampleSQL = `
WITH running AS MATERIALIZED (
    SELECT t.task_type, t.limit_key, t.counted, c.key_space
    FROM corotask.tasks t
    LEFT JOIN corotask.type_controls c ON c.task_type = t.task_type
    WHERE t.claim IS NOT NULL AND t.claim_expires_at >= corotask.now()
), keys AS (
    SELECT limit_key, count(*) AS n FROM running
    WHERE key_space = $2 AND limit_key IS NOT NULL
    GROUP BY limit_key ORDER BY n DESC, limit_key LIMIT 1
)
SELECT (SELECT count(*) FROM running WHERE task_type = $1)::int,
       (SELECT count(*) FROM running WHERE task_type = $1 AND counted IS NOT TRUE)::int,
       coalesce((SELECT n FROM keys), 0)::int,
       coalesce((SELECT limit_key FROM keys), ''),
       (SELECT count(*) FROM corotask.tasks
        WHERE task_type = $1 AND claim IS NULL AND done_at IS NULL AND wake_at <= corotask.now())::int,
       corotask.now()::text`

// SampleLimits reads the running claims of db as the limits count them.
func SampleLimits(ctx context.Context, db tasks.DB) (LimitSample, error) {
	var s LimitSample
	err := db.QueryRow(ctx, sampleSQL, string(TypeNode), KeySpaceTree).
		Scan(&s.Node, &s.Uncounted, &s.Key, &s.KeyName, &s.NodeWaits, &s.SampleTime)
	if err != nil {
		return s, fmt.Errorf("sample limits: %w", err)
	}
	return s, nil
}

// runningSQL lists the unexpired claims of the limited types, to explain a
// sample above a limit (read just after it, so maybe not the same instant).
const runningSQL = `
SELECT format('%s %s key=%s by=%s claimed_at=%s expires=%s heartbeat=%s counted=%s attempts=%s',
              t.task_type, t.task_id, t.limit_key, t.claimed_by, t.claimed_at, t.claim_expires_at,
              t.heartbeat, t.counted, t.attempts)
FROM corotask.tasks t
WHERE t.claim IS NOT NULL AND t.claim_expires_at >= corotask.now() AND t.task_type = ANY ($1::text[])
ORDER BY t.task_type, t.limit_key, t.claimed_at`

// Limits is what the sampler saw of the flow-control limits during a run.
type Limits struct {
	NodeMaxRunning, TreeKeyLimit int // the limits set

	Samples      int // readings taken
	SampleErrors int // readings that failed (the database was restarting...)
	// The most running claims seen at once: of TypeNode, and of one tree's
	// key; the most ready TypeNode tasks seen waiting.
	NodeMax, KeyMax, NodeWaitsMax int
	// Readings at a limit and above it.
	NodeAtLimit, KeyAtLimit, NodeOver, KeyOver int
	// Uncounted counts readings in which a running TypeNode claim was not
	// marked as counting toward the maximum.
	Uncounted int
	// Over describes the first readings above a limit (at most 5), with the
	// claims that ran then.
	Over []string
}

// Record records one reading, and reports whether it is above a limit or saw
// an uncounted claim.
func (l *Limits) Record(s LimitSample) (over bool) {
	l.Samples++
	l.NodeMax = max(l.NodeMax, s.Node)
	l.KeyMax = max(l.KeyMax, s.Key)
	l.NodeWaitsMax = max(l.NodeWaitsMax, s.NodeWaits)
	if s.Uncounted > 0 {
		l.Uncounted++
	}
	switch {
	case s.Node > l.NodeMaxRunning:
		l.NodeOver++
		over = true
	case s.Node == l.NodeMaxRunning:
		l.NodeAtLimit++
	}
	switch {
	case s.Key > l.TreeKeyLimit:
		l.KeyOver++
		over = true
	case s.Key == l.TreeKeyLimit:
		l.KeyAtLimit++
	}
	return over || s.Uncounted > 0
}

// Violations lists the limits exceeded, empty when they held (or when the
// run set none: l nil).
func (l *Limits) Violations() []string {
	if l == nil {
		return nil
	}
	var v []string
	if l.NodeMax > l.NodeMaxRunning {
		v = append(v, fmt.Sprintf("%d running %s polls seen at once, above their maximum %d (%d readings above it)",
			l.NodeMax, TypeNode, l.NodeMaxRunning, l.NodeOver))
	}
	if l.KeyMax > l.TreeKeyLimit {
		v = append(v, fmt.Sprintf("%d running tasks of one key of %s seen at once, above its limit %d (%d readings above it)",
			l.KeyMax, KeySpaceTree, l.TreeKeyLimit, l.KeyOver))
	}
	if l.Uncounted > 0 {
		v = append(v, fmt.Sprintf("%d readings saw a running %s claim that did not count toward its maximum", l.Uncounted, TypeNode))
	}
	for _, s := range l.Over {
		v = append(v, "  "+strings.ReplaceAll(s, "\n", "\n    "))
	}
	if l.Samples == 0 {
		v = append(v, "the limits sampler took no reading")
	}
	return v
}

// String prints the figures.
func (l *Limits) String() string {
	if l == nil {
		return "limits: none set\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "limits: %d readings (%d failed)\n", l.Samples, l.SampleErrors)
	fmt.Fprintf(&b, "  %-40s max seen %d, limit %d; readings at the limit %d, above %d; most ready waiting %d\n",
		"running "+string(TypeNode), l.NodeMax, l.NodeMaxRunning, l.NodeAtLimit, l.NodeOver, l.NodeWaitsMax)
	fmt.Fprintf(&b, "  %-40s max seen %d, limit %d; readings at the limit %d, above %d\n",
		"running per key of "+KeySpaceTree, l.KeyMax, l.TreeKeyLimit, l.KeyAtLimit, l.KeyOver)
	return b.String()
}

// samplerEvery is how often the sampler reads the running claims.
const samplerEvery = 5 * time.Millisecond

// sampleLimits reads the running claims every few milliseconds until ctx
// ends, from the harness's own process: an observer independent of the
// executors whose claims it counts.
func (h *harness) sampleLimits(ctx context.Context, l *Limits) {
	h.everyWhileUp(ctx, samplerEvery, func(c context.Context) {
		s, err := SampleLimits(c, h.pool)
		if err != nil {
			if ctx.Err() == nil {
				l.SampleErrors++
			}
		} else if l.Record(s) && len(l.Over) < 5 {
			l.Over = append(l.Over, h.explain(c, s))
		}
	})
}

// explain describes a reading above a limit, with the claims running then.
func (h *harness) explain(ctx context.Context, s LimitSample) string {
	what := fmt.Sprintf("at %s: %d running %s (%d not counted), %d running of key %q", s.SampleTime, s.Node, TypeNode, s.Uncounted, s.Key, s.KeyName)
	rows, err := h.pool.Query(ctx, runningSQL, []string{string(TypeNode), string(TypeDoomed)})
	if err == nil {
		var running []string
		if running, err = pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
			return what + "; running just after:\n" + strings.Join(running, "\n")
		}
	}
	return what + fmt.Sprintf(" (running claims not read: %v)", err)
}
