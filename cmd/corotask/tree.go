package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/treeread"
	"github.com/corotask/corotask/tasks"
)

// defaultTreeMax is how many tasks tree prints by default.
const defaultTreeMax = 10000

var treeCmd = &command{
	name:    "tree",
	args:    taskRefArgs,
	summary: "show a task and its descendants as a tree",
	help: `Show task TASK and its descendants as a tree, one task per line: ID, type and
status (and key, when a task of the tree has one), children in the order
they were created. At most --max tasks are
shown, the levels nearest TASK first; a note says when the tree was cut.
With --type and --key instead of TASK, show the tree of the live task of that
type with that key.`,
	example: `corotask tree 01JD7X3M5Q8R9S2T4V6W8Y0Z1A
corotask tree --type orders.checkout --key order-42`,
	flags: func(fs *flag.FlagSet) runFunc {
		maxNodes := fs.String("max", strconv.Itoa(defaultTreeMax), fmt.Sprintf("show at most `N` tasks (default %d)", defaultTreeMax))
		ref := taskRefFlags(fs, "show the tree of")
		return func(ctx context.Context, a *app, args []string) error {
			if _, err := ref.parse(args); err != nil {
				return err
			}
			limit, err := parseCount("--max", *maxNodes, false)
			if err != nil {
				return err
			}
			var nodes []treeNode
			var id tasks.ID
			err = a.readSnapshot(ctx, func(tx pgx.Tx, _ time.Time) (err error) {
				if id, err = ref.resolve(ctx, tx); err != nil {
					return err
				}
				nodes, err = loadTree(ctx, tx, id, limit+1)
				return err
			})
			if err != nil {
				return taskError(err)
			}
			if len(nodes) == 0 {
				return fmt.Errorf("%w: %s", tasks.ErrNotFound, id)
			}
			truncated := len(nodes) > limit
			if truncated {
				nodes = nodes[:limit]
			}
			if err := printTree(a.stdout, nodes); err != nil {
				return err
			}
			if truncated {
				fmt.Fprintf(a.stdout, "(tree cut at %s: use --max to see more)\n", plural(limit, "task"))
			}
			if note := cycleNote(nodes); note != "" {
				fmt.Fprintln(a.stdout, note)
			}
			return nil
		}
	},
}

// treeNode is one task of a tree.
type treeNode struct {
	ID, Parent tasks.ID
	Type       string
	Status     string
	Key        string // "": none
}

// loadTree returns the task root and its descendants, breadth first (all the
// children of a level before any grandchild), at most limit of them, each
// once (see query.Tree); none when root does not exist.
func loadTree(ctx context.Context, db tasks.DB, root tasks.ID, limit int) ([]treeNode, error) {
	rows, err := treeread.Query(ctx, db, root, limit)
	if err != nil {
		return nil, err
	}
	var n treeNode
	var out []treeNode
	// The first four columns and the key, named; nil skips the others.
	fields := rows.FieldDescriptions()
	scans := make([]any, len(fields))
	copy(scans, []any{&n.ID, &n.Parent, &n.Type, &n.Status})
	for i, f := range fields {
		if f.Name == "task_key" {
			scans[i] = &n.Key
		}
	}
	_, err = pgx.ForEachRow(rows, scans, func() error {
		out = append(out, n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read tree: %w", err)
	}
	return out, nil
}

// cycleNote says when the root of nodes is its own ancestor: rows written
// by hand (the functions that create tasks refuse it) may form a cycle.
func cycleNote(nodes []treeNode) string {
	root := nodes[0]
	if root.Parent == root.ID {
		return fmt.Sprintf("(the rows form a parent cycle: %s's parent is itself)", root.ID)
	}
	for _, n := range nodes[1:] {
		if n.ID == root.Parent {
			return fmt.Sprintf("(the rows form a parent cycle: %s's parent %s is one of its descendants)", root.ID, root.Parent)
		}
	}
	return ""
}

// printTree prints nodes (the root first) as a tree with box-drawing
// characters, in aligned columns, each task once: a task listed again, or
// given as a child of the root it is, is left out.
func printTree(w io.Writer, nodes []treeNode) error {
	children := make(map[tasks.ID][]treeNode)
	seen := map[tasks.ID]bool{nodes[0].ID: true}
	for _, n := range nodes[1:] {
		if !seen[n.ID] {
			seen[n.ID] = true
			children[n.Parent] = append(children[n.Parent], n)
		}
	}
	for _, c := range children {
		sort.Slice(c, func(i, j int) bool { return string(c[i].ID[:]) < string(c[j].ID[:]) })
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// A column of keys is there when a task of the tree has one.
	keyed := slices.ContainsFunc(nodes, func(n treeNode) bool { return n.Key != "" })
	line := func(prefix string, n treeNode) {
		if keyed {
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", prefix, n.ID, oneLine(n.Type), oneLine(n.Status), cmp.Or(oneLine(n.Key), "-"))
			return
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\n", prefix, n.ID, oneLine(n.Type), oneLine(n.Status))
	}
	// A child is printed under a parent printed before it, so a cycle in
	// the rows (a parent below its child) cannot be walked.
	printed := make(map[tasks.ID]bool, len(seen))
	// Depth first, with an explicit stack: a tree may be deeper than is
	// comfortable for recursion.
	type item struct {
		node          treeNode
		indent, joint string
	}
	line("", nodes[0])
	printed[nodes[0].ID] = true
	var stack []item
	push := func(parent tasks.ID, indent string) {
		var c []treeNode
		for _, n := range children[parent] {
			if !printed[n.ID] {
				printed[n.ID] = true
				c = append(c, n)
			}
		}
		for i := len(c) - 1; i >= 0; i-- {
			joint := "├─ "
			if i == len(c)-1 {
				joint = "└─ "
			}
			stack = append(stack, item{c[i], indent, joint})
		}
	}
	push(nodes[0].ID, "")
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		line(it.indent+it.joint, it.node)
		next := it.indent + "│  "
		if it.joint == "└─ " {
			next = it.indent + "   "
		}
		push(it.node.ID, next)
	}
	return tw.Flush()
}
