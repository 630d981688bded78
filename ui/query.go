package ui

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/internal/treeread"
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
	Key          string // empty when the task has none
	Priority     int    // claim order: the higher first (0 is the default)
	LimitKey     string // the key its type's key space counts; empty when none
}

// scanRow reads a task of a list, whose columns are query.RowColumns.
func scanRow(r pgx.CollectableRow) (taskRow, error) {
	var t taskRow
	err := r.Scan(&t.ID, &t.Parent, &t.Type, &t.Status, &t.WakeAt, &t.Heartbeat, &t.InboxLen,
		&t.InboxNextLen, &t.Failures, &t.LastError, &t.CreatedAt, &t.DoneAt, &t.Key, &t.Priority, &t.LimitKey)
	return t, err
}

// listQuery is what the tasks page lists.
type listQuery struct {
	Type    string
	Status  tasks.Status
	Parent  tasks.ID
	Key     string    // tasks with this key (see tasks.Spec.Key)
	Failing bool      // live tasks whose last poll failed
	Since   time.Time // created at or after
	Until   time.Time // created before
	Newest  bool      // newest first; else oldest first
	After   tasks.ID  // the page after this task, in the sort order
	Limit   int
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
	// IDs are ULIDs: their first 48 bits are the creation time in
	// milliseconds, so a time range is a range of the primary key.
	l := query.TaskList{Columns: query.RowColumns, Type: q.Type, Status: string(q.Status), StatusIndexed: true, Parent: q.Parent,
		Key: q.Key, Newest: q.Newest, Limit: q.Limit + 1}
	if q.Failing {
		l.Failing = query.LiveWithFailures
	}
	if !q.Since.IsZero() {
		l.From = idAt(q.Since)
	}
	if !q.Until.IsZero() {
		l.Until = idAt(q.Until)
	}
	if l.From == (tasks.ID{}) && !q.Since.IsZero() || l.Until == (tasks.ID{}) && !q.Until.IsZero() {
		// A bound before 1970 is the zero ID, which the database reads as
		// NULL: the list holds no task, as a comparison with NULL says.
		return nil, false, nil
	}
	if q.Newest {
		l.Before = q.After
	} else {
		l.After = q.After
	}
	sql, args := l.SQL()
	out, err := readRows(ctx, db, "list tasks", sql, args)
	if err != nil {
		return nil, false, err
	}
	more := len(out) > q.Limit
	if more {
		out = out[:q.Limit]
	}
	return out, more, nil
}

// failingTasks returns the live tasks whose last poll failed, the newest
// first.
func failingTasks(ctx context.Context, db tasks.DB, limit int) ([]taskRow, error) {
	return readRows(ctx, db, "failing tasks", query.UIFailingLive, limit)
}

// recentlyFailed returns the tasks that failed in the last hour, the latest
// first, among the last 10000 that ended.
func recentlyFailed(ctx context.Context, db tasks.DB, limit int) ([]taskRow, error) {
	return readRows(ctx, db, "failed tasks", query.UIRecentlyFailed, limit)
}

// readRows runs sql, whose columns are query.RowColumns, and reads its rows;
// what names the list in an error.
func readRows(ctx context.Context, db tasks.DB, what, sql string, args ...any) ([]taskRow, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// childList returns the first children of a task, in creation order, and
// how many it has in each status.
func childList(ctx context.Context, db tasks.DB, parent tasks.ID, limit int) ([]taskRow, map[string]int64, error) {
	list, err := readRows(ctx, db, "children", query.Children, parent, limit)
	if err != nil {
		return nil, nil, err
	}
	rows, err := db.Query(ctx, query.ChildrenByStatus, parent)
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
	rows, err := treeread.Query(ctx, db, root, limit+1)
	if err != nil {
		return nil, 0, false, err
	}
	nodes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*treeNode, error) {
		var n treeNode
		t := &n.taskRow
		err := r.Scan(&t.ID, &t.Parent, &t.Type, &t.Status, &t.WakeAt, &t.Heartbeat, &t.InboxLen,
			&t.InboxNextLen, &t.Failures, &t.LastError, &t.CreatedAt, &t.DoneAt, &t.Key, &t.Priority, &t.LimitKey, &n.Depth)
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
	rows, err := db.Query(ctx, query.ExecutorsByID, ids)
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
	err = db.QueryRow(ctx, query.ExecutorsLive).Scan(&n, &slots, &claims)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("count executors: %w", err)
	}
	return n, slots, claims, nil
}
