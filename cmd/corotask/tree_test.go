package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

func TestTree(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	root := c.create("--type", "root")
	a := c.create("--type", "a", "--parent", root.String())
	a1 := c.create("--type", "a.one", "--parent", a.String())
	a2 := c.create("--type", "a.two", "--parent", a.String(), "--in", "1h")
	a21 := c.create("--type", "a.two.one", "--parent", a2.String())
	b := c.create("--type", "b", "--parent", root.String())
	b1 := c.create("--type", "b.one", "--parent", b.String())
	c.ok("cancel", b.String())
	c.create("--type", "unrelated")

	want := []struct {
		prefix string
		id     tasks.ID
		typ    string
		status string
	}{
		{"", root, "root", "ready"},
		{"├─ ", a, "a", "ready"},
		{"│  ├─ ", a1, "a.one", "ready"},
		{"│  └─ ", a2, "a.two", "sleeping"},
		{"│     └─ ", a21, "a.two.one", "ready"},
		{"└─ ", b, "b", "canceled"},
		{"   └─ ", b1, "b.one", "canceled"},
	}
	out := c.ok("tree", root.String())
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, len(want), out)
	typeCol := -1
	for i, w := range want {
		require.Regexp(t, `^`+w.prefix+w.id.String()+` +`+strings.ReplaceAll(w.typ, ".", `\.`)+` +`+w.status+`$`, lines[i])
		// Aligned columns, counted in characters: the tree is drawn with
		// multi-byte runes.
		at := len([]rune(lines[i][:strings.Index(lines[i], " "+w.typ+" ")]))
		if typeCol < 0 {
			typeCol = at
		}
		require.Equal(t, typeCol, at, "type column of %q", lines[i])
	}

	// A subtree.
	out = c.ok("tree", a2.UUID())
	require.Regexp(t, `^`+a2.String()+` +a\.two +sleeping\n└─ `+a21.String()+` +a\.two\.one +ready\n$`, out)

	// Cut at --max tasks, nearest levels first.
	out = c.ok("tree", root.String(), "--max", "3")
	require.Regexp(t, `^`+root.String()+` +root +ready\n├─ `+a.String()+` +a +ready\n└─ `+b.String()+
		` +b +canceled\n\(tree cut at 3 tasks: use --max to see more\)\n$`, out)
	out = c.ok("tree", root.String(), "--max", "7")
	require.NotContains(t, out, "tree cut")
}

func TestTreeErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	unknown := tasks.NewID()
	requireError(t, c.run("tree", unknown.String()), "tree", "task not found: "+unknown.String())
	requireUsage(t, c.run("tree", unknown.String(), "--max", "0"), "tree", `invalid --max "0"`)
}
