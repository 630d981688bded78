package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
	"github.com/corotask/corotask/ui"
)

// TestTreeOfACycle: rows made by hand can form a parent cycle; the tree
// page returns and shows each task once.
func TestTreeOfACycle(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	ctx := context.Background()
	self := s.create(tasks.Spec{Type: "self"})
	_, err := s.pool.Exec(ctx, `UPDATE corotask.tasks SET parent_id = task_id WHERE task_id = $1`, self)
	require.NoError(t, err)
	a := s.create(tasks.Spec{Type: "a"})
	b := s.create(tasks.Spec{Type: "b", Parent: a})
	b1 := s.create(tasks.Spec{Type: "b.one", Parent: b})
	_, err = s.pool.Exec(ctx, `UPDATE corotask.tasks SET parent_id = $2 WHERE task_id = $1`, a, b)
	require.NoError(t, err)

	for _, tc := range []struct {
		root tasks.ID
		want []tasks.ID
	}{{self, []tasks.ID{self}}, {a, []tasks.ID{a, b, b1}}, {b, []tasks.ID{a, b, b1}}} {
		status, body := s.get("/tasks/" + tc.root.String() + "/tree")
		require.Equal(t, http.StatusOK, status, body)
		require.Equal(t, len(tc.want), strings.Count(body, `<a class="id" `), "one node per task\n%s", body)
		for _, id := range tc.want {
			require.Equal(t, 1, strings.Count(body, ">"+id.String()+"</a>"), "%s once\n%s", id, body)
		}
		require.Contains(t, body, fmt.Sprintf(">%d tasks", len(tc.want)))
	}
}
