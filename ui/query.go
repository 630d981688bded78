package ui

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

// taskRow is a task as the lists show it.
type taskRow struct {
	ID, Parent   tasks.ID
	Type         string
	Status       string
	WakeAt       *time.Time
	Heartbeat    *time.Time
	InboxLen     int
	InboxNextLen int
	Failures     int
	LastError    string
	CreatedAt    time.Time
	DoneAt       *time.Time
}

// served is a CTE that reads the executors once per statement: whether any
// has registered, and the types the live ones serve.
const served = `served AS MATERIALIZED (
	SELECT EXISTS (SELECT 1 FROM corotask.executors) AS registered,
	       ARRAY(SELECT DISTINCT x FROM corotask.executors e, unnest(e.task_types) AS x
	             WHERE e.expires_at > now()) AS types)`

// statusExpr is corotask.status(t), written out with the executors read
// once (s is the row of served). corotask.status, whose "unserved" reads the
// executors, cannot be inlined by the planner: called per row it costs a
// few microseconds, 100ms for a count over 20000 rows. A test checks that
// the two agree.
const statusExpr = `(CASE
	WHEN t.outcome IS NOT NULL THEN t.outcome
	WHEN t.claim IS NOT NULL AND t.claim_expires_at < now() THEN 'stale'
	WHEN t.claim IS NOT NULL THEN 'running'
	WHEN t.wake_at IS NULL THEN 'suspended'
	WHEN t.wake_at > now() AND t.failures > 0 THEN 'retrying'
	WHEN t.wake_at > now() THEN 'sleeping'
	WHEN s.registered AND NOT t.task_type = ANY (s.types) THEN 'unserved'
	ELSE 'ready'
END)`

// rowColumns are the columns scanRow reads; t is the tasks row and s the
// row of served. The last error is cut, as a list shows only its start.
const rowColumns = `t.task_id, t.parent_id, t.task_type, ` + statusExpr + `, t.wake_at, t.heartbeat,
	cardinality(t.inbox), cardinality(t.inbox_next), t.failures, left(coalesce(t.last_error, ''), 200),
	t.created_at, t.done_at`

func scanRow(r pgx.CollectableRow) (taskRow, error) {
	var t taskRow
	err := r.Scan(&t.ID, &t.Parent, &t.Type, &t.Status, &t.WakeAt, &t.Heartbeat, &t.InboxLen,
		&t.InboxNextLen, &t.Failures, &t.LastError, &t.CreatedAt, &t.DoneAt)
	return t, err
}

// Index-friendly conditions that each status implies. They are added to the
// status test so that the planner can use the partial indexes of the claim
// (tasks_ready_idx, tasks_running_idx) and of retention (tasks_done_idx).
const (
	condWaiting   = `(t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NOT NULL)`
	condSuspended = `(t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NULL)`
	condClaimed   = `(t.claim IS NOT NULL)`
	condEnded     = `(t.done_at IS NOT NULL)`
	// condIndexed is every task one of the claim's partial indexes holds:
	// live and waiting for a time, or running.
	condIndexed = `(` + condWaiting + ` OR ` + condClaimed + `)`
	// condUnindexed is every other task: suspended or ended.
	condUnindexed = `(t.claim IS NULL AND (t.done_at IS NOT NULL OR t.wake_at IS NULL))`
)

// statusCondition returns the index-friendly condition status implies.
func statusCondition(s tasks.Status) string {
	switch {
	case s.Ended():
		return condEnded
	case s == "suspended":
		return condSuspended
	case s == "running" || s == "stale":
		return condClaimed
	default: // ready, sleeping, and the statuses of waiting tasks
		return condWaiting
	}
}

// listQuery is what the tasks page lists.
type listQuery struct {
	Type    string
	Status  tasks.Status
	Parent  tasks.ID
	Failing bool      // live tasks whose last poll failed
	Since   time.Time // created at or after
	Until   time.Time // created before
	Newest  bool      // newest first; else oldest first
	After   tasks.ID  // the page after this task, in the sort order
	Limit   int
}

// where returns the SQL conditions and arguments of q's filters (not the
// cursor).
func (q listQuery) where() ([]string, []any) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "$?", fmt.Sprintf("$%d", len(args))))
	}
	if q.Type != "" {
		add("t.task_type = $?", q.Type)
	}
	if q.Status != "" {
		where = append(where, statusCondition(q.Status))
		add(statusExpr+" = $?", string(q.Status))
	}
	if !q.Parent.IsZero() {
		add("t.parent_id = $?", q.Parent)
	}
	if q.Failing {
		where = append(where, condIndexed, "t.failures > 0")
	}
	// IDs are ULIDs: their first 48 bits are the creation time in
	// milliseconds, so a time range is a range of the primary key.
	if !q.Since.IsZero() {
		add("t.task_id >= $?", idAt(q.Since))
	}
	if !q.Until.IsZero() {
		add("t.task_id < $?", idAt(q.Until))
	}
	return where, args
}

// idAt returns the smallest ID of time at.
func idAt(at time.Time) tasks.ID {
	var id tasks.ID
	ms := uint64(max(at.UnixMilli(), 0))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], ms)
	copy(id[:6], b[2:])
	return id
}

// listTasks returns one page of tasks, and whether there are more after it.
func listTasks(ctx context.Context, db tasks.DB, q listQuery) ([]taskRow, bool, error) {
	where, args := q.where()
	order := "ASC"
	if q.Newest {
		order = "DESC"
	}
	if !q.After.IsZero() {
		args = append(args, q.After)
		op := ">"
		if q.Newest {
			op = "<"
		}
		where = append(where, fmt.Sprintf("t.task_id %s $%d", op, len(args)))
	}
	sql := `WITH ` + served + ` SELECT ` + rowColumns + ` FROM served s, corotask.tasks t`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, q.Limit+1)
	sql += fmt.Sprintf(" ORDER BY t.task_id %s LIMIT $%d", order, len(args))
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list tasks: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, false, fmt.Errorf("list tasks: %w", err)
	}
	more := len(out) > q.Limit
	if more {
		out = out[:q.Limit]
	}
	return out, more, nil
}

// count is how many tasks of a type are in a status.
type count struct {
	Type, Status string
	N            int64
	// Estimated: N is scaled up from a sample of the table.
	Estimated bool
}

// sampleRows is about how many rows an estimate reads.
const sampleRows = 20000

// tableRows returns the planner's estimate of the rows of corotask.tasks.
func tableRows(ctx context.Context, db tasks.DB) (float64, error) {
	var n float64
	err := db.QueryRow(ctx, `SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'corotask.tasks'::regclass`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("table size: %w", err)
	}
	return n, nil
}

// samplePercent returns the share of the table's blocks (in percent) an
// estimate reads, or 0 when the table is small enough (below threshold rows)
// to count exactly.
func samplePercent(rows float64, threshold int) float64 {
	if threshold < 0 || rows < float64(threshold) || rows == 0 {
		return 0
	}
	return min(100, 100*sampleRows/rows)
}

// exactWaitingLimit is the most tasks waiting for a time (the entries of
// the claim's index of ready and sleeping tasks) that countTasks counts
// exactly on a table that is sampled: past it, reading them all costs about
// as much as reading the table.
const exactWaitingLimit = 10000

// countTasks returns how many tasks there are of each type (only typ, when
// given) in each status. With pct 0 every task is counted exactly. Else
// running tasks are counted exactly (their index holds only them, as many as
// the executors run), so are the tasks waiting for a time while there are
// fewer than exactWaitingLimit of them, and the others are estimated from a
// pct% block sample of the table.
func countTasks(ctx context.Context, db tasks.DB, typ string, pct float64) ([]count, error) {
	const q = `WITH ` + served + ` SELECT t.task_type, ` + statusExpr + `, count(*)::float8 FROM served s, corotask.tasks t`
	const ofType = ` AND ($1 = '' OR t.task_type = $1) GROUP BY 1, 2`
	if pct == 0 {
		return collectCounts(ctx, db, q+` WHERE true`+ofType, 1, false, typ)
	}
	var waiting float64
	if err := db.QueryRow(ctx, `SELECT greatest(reltuples, 0) FROM pg_class
		WHERE oid = 'corotask.tasks_ready_idx'::regclass`).Scan(&waiting); err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	exact, sampled := condClaimed, `NOT `+condClaimed
	if waiting < exactWaitingLimit {
		exact, sampled = condIndexed, condUnindexed
	}
	out, err := collectCounts(ctx, db, q+` WHERE `+exact+ofType, 1, false, typ)
	if err != nil {
		return nil, err
	}
	more, err := collectCounts(ctx, db, q+` TABLESAMPLE SYSTEM ($2) WHERE `+sampled+ofType, 100/pct, true, typ, pct)
	if err != nil {
		return nil, err
	}
	return append(out, more...), nil
}

func collectCounts(ctx context.Context, db tasks.DB, sql string, scale float64, estimated bool, args ...any) ([]count, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (count, error) {
		var c count
		var n float64
		err := r.Scan(&c.Type, &c.Status, &n)
		c.N, c.Estimated = int64(n*scale+0.5), estimated
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	return out, nil
}

// typeActivity is what the overview shows of a type over the last hour.
type typeActivity struct {
	Type string
	// Ended and Failed in the last hour, and Buckets: ended per 5 minutes,
	// the oldest first.
	Ended, Failed int64
	Buckets       [12]int64
	Estimated     bool
	// Ready is how many tasks are ready now, and Lag how long the oldest of
	// them has waited.
	Ready int64
	Lag   time.Duration
}

// activity returns the throughput and lag of each type. Throughput is
// counted from ended tasks (exactly below pct 0, else from a pct% sample);
// lag from the ready tasks, exactly, through the claim's index.
func activity(ctx context.Context, db tasks.DB, pct float64) (map[string]*typeActivity, error) {
	out := make(map[string]*typeActivity)
	get := func(typ string) *typeActivity {
		a := out[typ]
		if a == nil {
			a = &typeActivity{Type: typ}
			out[typ] = a
		}
		return a
	}
	sql := `SELECT t.task_type, least(11, floor(extract(epoch FROM now() - t.done_at) / 300))::int,
			count(*)::float8, (count(*) FILTER (WHERE t.outcome = 'failed'))::float8
		FROM corotask.tasks t`
	scale, args := 1.0, []any{}
	if pct > 0 {
		sql += ` TABLESAMPLE SYSTEM ($1)`
		scale, args = 100/pct, append(args, pct)
	}
	sql += ` WHERE t.done_at > now() - interval '1 hour' GROUP BY 1, 2`
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	var typ string
	var bucket int
	var ended, failed float64
	_, err = pgx.ForEachRow(rows, []any{&typ, &bucket, &ended, &failed}, func() error {
		a := get(typ)
		n := int64(ended*scale + 0.5)
		a.Ended += n
		a.Failed += int64(failed*scale + 0.5)
		a.Buckets[11-max(0, min(bucket, 11))] += n
		a.Estimated = pct > 0
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	rows, err = db.Query(ctx, `SELECT t.task_type, count(*), extract(epoch FROM now() - min(t.wake_at))
		FROM corotask.tasks t
		WHERE t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NOT NULL AND t.wake_at <= now()
		GROUP BY 1`)
	if err != nil {
		return nil, fmt.Errorf("lag: %w", err)
	}
	var ready int64
	var lag float64
	_, err = pgx.ForEachRow(rows, []any{&typ, &ready, &lag}, func() error {
		a := get(typ)
		a.Ready, a.Lag = ready, time.Duration(lag*float64(time.Second))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lag: %w", err)
	}
	return out, nil
}

// failingTasks returns the live tasks whose last poll failed, the newest
// first. The subquery is fenced (OFFSET 0) so that the planner reads the
// claim's partial indexes rather than walk the primary key backwards
// through every ended task.
func failingTasks(ctx context.Context, db tasks.DB, limit int) ([]taskRow, error) {
	rows, err := db.Query(ctx, `WITH `+served+` SELECT * FROM (SELECT `+rowColumns+` FROM served s, corotask.tasks t
		WHERE `+condIndexed+` AND t.failures > 0 OFFSET 0) s ORDER BY task_id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("failing tasks: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("failing tasks: %w", err)
	}
	return out, nil
}

// recentlyFailed returns the tasks that failed in the last hour, the latest
// first, among the last 10000 that ended (so that a table of a million
// successes costs no more than that to look through).
func recentlyFailed(ctx context.Context, db tasks.DB, limit int) ([]taskRow, error) {
	rows, err := db.Query(ctx, `WITH `+served+` SELECT `+rowColumns+` FROM served s, (
			SELECT * FROM corotask.tasks t WHERE t.done_at > now() - interval '1 hour'
			ORDER BY t.done_at DESC LIMIT 10000) t
		WHERE t.outcome = 'failed' ORDER BY t.done_at DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("failed tasks: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("failed tasks: %w", err)
	}
	return out, nil
}

// childList returns the first children of a task, in creation order, and
// how many it has in each status.
func childList(ctx context.Context, db tasks.DB, parent tasks.ID, limit int) ([]taskRow, map[string]int64, error) {
	rows, err := db.Query(ctx, `WITH `+served+` SELECT `+rowColumns+` FROM served s, corotask.tasks t
		WHERE t.parent_id = $1 ORDER BY t.task_id LIMIT $2`, parent, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("children: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, nil, fmt.Errorf("children: %w", err)
	}
	rows, err = db.Query(ctx, `WITH `+served+` SELECT `+statusExpr+`, count(*) FROM served s, corotask.tasks t
		WHERE t.parent_id = $1 GROUP BY 1`, parent)
	if err != nil {
		return nil, nil, fmt.Errorf("count children: %w", err)
	}
	counts := make(map[string]int64)
	var s string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&s, &n}, func() error { counts[s] = n; return nil }); err != nil {
		return nil, nil, fmt.Errorf("count children: %w", err)
	}
	return list, counts, nil
}

// treeNode is one task of a tree.
type treeNode struct {
	taskRow
	Depth    int
	Children []*treeNode
}

// loadTreeNodes returns the tree under root, breadth first and at most limit
// tasks, and whether it was cut; nil when root does not exist.
func loadTreeNodes(ctx context.Context, db tasks.DB, root tasks.ID, limit int) (*treeNode, int, bool, error) {
	// A recursive query is evaluated level by level, and only as far as the
	// LIMIT needs.
	rows, err := db.Query(ctx, `WITH RECURSIVE `+served+`, tree AS (
			SELECT `+rowColumns+`, 0 AS depth FROM served s, corotask.tasks t WHERE t.task_id = $1
			UNION ALL
			SELECT `+strings.ReplaceAll(rowColumns, "t.", "c.")+`, tree.depth + 1
			FROM served s, tree JOIN corotask.tasks c ON c.parent_id = tree.task_id
		)
		SELECT * FROM tree LIMIT $2`, root, limit+1)
	if err != nil {
		return nil, 0, false, fmt.Errorf("read tree: %w", err)
	}
	nodes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*treeNode, error) {
		var n treeNode
		t := &n.taskRow
		err := r.Scan(&t.ID, &t.Parent, &t.Type, &t.Status, &t.WakeAt, &t.Heartbeat, &t.InboxLen,
			&t.InboxNextLen, &t.Failures, &t.LastError, &t.CreatedAt, &t.DoneAt, &n.Depth)
		return &n, err
	})
	if err != nil {
		return nil, 0, false, fmt.Errorf("read tree: %w", err)
	}
	if len(nodes) == 0 {
		return nil, 0, false, nil
	}
	cut := len(nodes) > limit
	if cut {
		nodes = nodes[:limit]
	}
	byID := make(map[tasks.ID]*treeNode, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	for _, n := range nodes[1:] {
		if p := byID[n.Parent]; p != nil {
			p.Children = append(p.Children, n)
		}
	}
	for _, n := range nodes {
		slices.SortFunc(n.Children, func(a, b *treeNode) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	}
	return nodes[0], len(nodes), cut, nil
}

// unservedTypes returns the types of ready tasks that no live executor
// serves, once executors have registered; it reads the claim's index.
func unservedTypes(ctx context.Context, db tasks.DB) ([]string, error) {
	rows, err := db.Query(ctx, `WITH `+served+` SELECT DISTINCT t.task_type FROM served s, corotask.tasks t
		WHERE t.claim IS NULL AND t.done_at IS NULL AND t.wake_at IS NOT NULL AND t.wake_at <= now()
		  AND s.registered AND NOT t.task_type = ANY (s.types)
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("unserved types: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("unserved types: %w", err)
	}
	return out, nil
}

// StatusSQL is statusExpr with what it needs: for the test that checks it
// against corotask.status.
const statusSQL = `WITH ` + served + ` SELECT t.task_id, ` + statusExpr + `, corotask.status(t) FROM served s, corotask.tasks t`

// executorInfo is what the task page shows of an executor.
type executorInfo struct {
	ID   tasks.ID
	Host string
	PID  int
}

// executorsByID returns the registered executors among ids.
func executorsByID(ctx context.Context, db tasks.DB, ids []tasks.ID) (map[tasks.ID]executorInfo, error) {
	rows, err := db.Query(ctx, `SELECT executor_id, host, pid FROM corotask.executors WHERE executor_id = ANY ($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read executors: %w", err)
	}
	out := make(map[tasks.ID]executorInfo)
	var e executorInfo
	_, err = pgx.ForEachRow(rows, []any{&e.ID, &e.Host, &e.PID}, func() error {
		out[e.ID] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read executors: %w", err)
	}
	return out, nil
}

// liveExecutors returns how many executors are live, their summed
// concurrency, and how many tasks are claimed.
func liveExecutors(ctx context.Context, db tasks.DB) (n, slots, claims int, err error) {
	err = db.QueryRow(ctx, `SELECT count(*), coalesce(sum(concurrency), 0),
			(SELECT count(*) FROM corotask.tasks t WHERE t.claim IS NOT NULL)
		FROM corotask.executors WHERE expires_at > now() AND stopped_at IS NULL`).Scan(&n, &slots, &claims)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("count executors: %w", err)
	}
	return n, slots, claims, nil
}
