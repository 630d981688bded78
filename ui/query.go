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

// rowColumns are the columns scanRow reads; t is the tasks row and s the
// row of served. The last error is cut, as a list shows only its start.
const rowColumns = `t.task_id, t.parent_id, t.task_type, ` + statusExpr + `, t.wake_at, t.heartbeat,
	t.inbox_len, t.inbox_next_len, t.failures, left(coalesce(t.last_error, ''), 200),
	t.created_at, t.done_at`

func scanRow(r pgx.CollectableRow) (taskRow, error) {
	var t taskRow
	err := r.Scan(&t.ID, &t.Parent, &t.Type, &t.Status, &t.WakeAt, &t.Heartbeat, &t.InboxLen,
		&t.InboxNextLen, &t.Failures, &t.LastError, &t.CreatedAt, &t.DoneAt)
	return t, err
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
// tasks, each once, and whether it was cut; nil when root does not exist.
func loadTreeNodes(ctx context.Context, db tasks.DB, root tasks.ID, limit int) (*treeNode, int, bool, error) {
	// A recursive query is evaluated level by level, and only as far as the
	// LIMIT needs. A task has one parent, so the walk down from root meets a
	// task twice only through a parent cycle (rows written by hand), and such
	// a cycle passes through root: not descending into root again visits each
	// task once.
	rows, err := db.Query(ctx, `WITH RECURSIVE `+served+`, tree AS (
			SELECT `+rowColumns+`, 0 AS depth FROM served s, corotask.tasks t WHERE t.task_id = $1
			UNION ALL
			SELECT `+strings.ReplaceAll(rowColumns, "t.", "c.")+`, tree.depth + 1
			FROM served s, tree JOIN corotask.tasks c ON c.parent_id = tree.task_id
			WHERE c.task_id <> $1
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
	// Each task once, whatever the rows: a child is linked under a parent
	// listed before it, so the nodes cannot form a cycle.
	byID := make(map[tasks.ID]*treeNode, len(nodes))
	kept := nodes[:0]
	for _, n := range nodes {
		if byID[n.ID] != nil {
			continue
		}
		if p := byID[n.Parent]; p != nil {
			p.Children = append(p.Children, n)
		}
		byID[n.ID] = n
		kept = append(kept, n)
	}
	nodes = kept
	for _, n := range nodes {
		slices.SortFunc(n.Children, func(a, b *treeNode) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	}
	return nodes[0], len(nodes), cut, nil
}

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
