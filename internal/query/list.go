package query

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// RowColumns are the columns of a task in a list of the web UI: t is the
// tasks row, s the row of Served. The last error is cut, as a list shows
// only its start; the key and the limit key are empty for a task without
// one.
const RowColumns = `t.task_id, t.parent_id, t.task_type, ` + Status + `, t.wake_at, t.heartbeat,
	t.inbox_len, t.inbox_next_len, t.failures, left(coalesce(t.last_error, ''), 200),
	t.created_at, t.done_at, coalesce(t.task_key, '') AS task_key, t.priority, coalesce(t.limit_key, '') AS limit_key`

// Conditions on t, the tasks row, that a list of failing tasks filters on.
const (
	// WithFailures holds the tasks that failed for good, or whose last poll
	// failed.
	WithFailures = `(t.failures > 0 OR t.outcome = 'failed')`
	// LiveWithFailures holds the live tasks whose last poll failed (waiting
	// out the backoff, ready again or running), read through the claim's
	// partial indexes.
	LiveWithFailures = `(` + Indexed + ` AND t.failures > 0)`
)

// An ID is a task ID (tasks.ID) to filter on; none (nil), or the zero ID,
// does not filter.
type ID interface{ IsZero() bool }

func set(id ID) bool { return id != nil && !id.IsZero() }

// TaskList is a list of tasks: which, in which order and how many. Zero
// fields do not filter. It is the one statement of this package that is
// built rather than constant, as its filters vary: SQL builds it.
type TaskList struct {
	// Columns are what the list returns of each task: TaskColumns or
	// RowColumns.
	Columns string
	Type    string
	// Status is the name of a status: the tasks Status says are in it.
	// With StatusIndexed, the condition of the index that holds the tasks
	// of that status (StatusCondition) is added, which lets the planner
	// read that index and sort what it finds rather than walk the primary
	// key: faster when few tasks are in the status, slower when many are.
	Status        string
	StatusIndexed bool
	Parent        ID
	// Key is a task key: the tasks with it.
	Key string
	// Failing is a condition the failing tasks meet: WithFailures or
	// LiveWithFailures.
	Failing string
	// From, After, Before and Until bound the task IDs, which order by
	// creation time (they are ULIDs): task_id >= From, > After, < Before and
	// < Until.
	From, After, Before, Until ID
	// Newest lists the newest tasks first; else the oldest first.
	Newest bool
	Limit  int
}

// SQL returns the statement that lists l's tasks and its named arguments.
// It walks the primary key in l's order; a filter on Status, Type or
// Failing is checked on each task walked (but see StatusIndexed), and one
// on Parent uses the parent index.
func (l TaskList) SQL() (string, pgx.NamedArgs) {
	var where []string
	args := pgx.NamedArgs{"limit": l.Limit}
	add := func(name, cond string, v any) {
		args[name] = v
		where = append(where, cond)
	}
	if l.Type != "" {
		add("type", "t.task_type = @type", l.Type)
	}
	if l.Status != "" {
		if l.StatusIndexed {
			where = append(where, StatusCondition(l.Status))
		}
		add("status", Status+" = @status", l.Status)
	}
	if set(l.Parent) {
		add("parent", "t.parent_id = @parent", l.Parent)
	}
	if l.Key != "" {
		add("key", "t.task_key = @key", l.Key)
	}
	if l.Failing != "" {
		where = append(where, l.Failing)
	}
	for _, b := range []struct {
		name, op string
		id       ID
	}{{"from", ">=", l.From}, {"after", ">", l.After}, {"before", "<", l.Before}, {"until", "<", l.Until}} {
		if set(b.id) {
			add(b.name, fmt.Sprintf("t.task_id %s @%s", b.op, b.name), b.id)
		}
	}
	sql := `WITH ` + Served + ` SELECT ` + l.Columns + ` FROM served s, corotask.tasks t`
	if len(where) > 0 {
		sql += ` WHERE ` + strings.Join(where, ` AND `)
	}
	order := `ASC`
	if l.Newest {
		order = `DESC`
	}
	return sql + ` ORDER BY t.task_id ` + order + ` LIMIT @limit`, args
}
