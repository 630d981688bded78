package query_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// A filter that holds nothing, or the zero ID, does not filter; each other
// is one named argument.
func TestTaskListBindsTheFiltersItHolds(t *testing.T) {
	t.Parallel()
	sql, args := query.TaskList{Columns: query.RowColumns, Parent: tasks.ID{}, Limit: 5}.SQL()
	require.Equal(t, pgx.NamedArgs{"limit": 5}, args)
	require.NotContains(t, sql, "corotask.tasks t WHERE")
	require.Contains(t, sql, "ORDER BY t.task_id ASC LIMIT @limit")

	id := tasks.NewID()
	sql, args = query.TaskList{Columns: query.TaskColumns, Type: "a", Status: "done", StatusIndexed: true, Parent: id,
		Failing: query.WithFailures, Before: id, Newest: true, Limit: 1}.SQL()
	require.Equal(t, pgx.NamedArgs{"limit": 1, "type": "a", "status": "done", "parent": id, "before": id}, args)
	for _, cond := range []string{"t.task_type = @type", query.Ended, query.Status + " = @status",
		"t.parent_id = @parent", query.WithFailures, "t.task_id < @before"} {
		require.Contains(t, sql, cond)
	}
	require.Contains(t, sql, "ORDER BY t.task_id DESC LIMIT @limit")
}
