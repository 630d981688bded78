package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

// TestTreeOfACycle: rows made by hand can form a parent cycle (a task its
// own parent, or two tasks each other's); tree returns and prints each task
// once, with a note on the cycle.
func TestTreeOfACycle(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	self := c.create("--type", "self")
	c.exec(`UPDATE corotask.tasks SET parent_id = task_id WHERE task_id = $1`, self)
	out := c.ok("tree", self.String())
	require.Regexp(t, `^`+self.String()+` +self +ready\n\(the rows form a parent cycle: `+self.String()+
		`'s parent is itself\)\n$`, out)

	// a -> b -> a, with a child of b outside the cycle.
	a := c.create("--type", "a")
	b := c.create("--type", "b", "--parent", a.String())
	b1 := c.create("--type", "b.one", "--parent", b.String())
	c.exec(`UPDATE corotask.tasks SET parent_id = $2 WHERE task_id = $1`, a, b)
	for _, tc := range []struct {
		root, other tasks.ID
	}{{a, b}, {b, a}} {
		out := c.ok("tree", tc.root.String())
		tree, note, ok := strings.Cut(out, "(the rows form a parent cycle: ")
		require.True(t, ok, out)
		require.Equal(t, tc.root.String()+"'s parent "+tc.other.String()+" is one of its descendants)\n", note)
		require.Equal(t, 3, strings.Count(tree, "\n"), out)
		for _, id := range []tasks.ID{a, b, b1} {
			require.Equal(t, 1, strings.Count(tree, id.String()), "%s once in\n%s", id, out)
		}
	}
}

// TestPrintTreeOfRepeatedRows: the printer prints each task once whatever
// rows it is given (a task listed twice, a task that is its own parent).
func TestPrintTreeOfRepeatedRows(t *testing.T) {
	t.Parallel()
	a, b := tasks.NewID(), tasks.NewID()
	var nodes []treeNode
	for range 50 {
		nodes = append(nodes, treeNode{ID: a, Parent: b, Type: "a", Status: "ready"},
			treeNode{ID: b, Parent: a, Type: "b", Status: "ready"})
	}
	nodes = append(nodes, treeNode{ID: b, Parent: b, Type: "b", Status: "ready"})
	var out strings.Builder
	require.NoError(t, printTree(&out, nodes))
	require.Regexp(t, `^`+a.String()+` +a +ready\n└─ `+b.String()+` +b +ready\n$`, out.String())
}
