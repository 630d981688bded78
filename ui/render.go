package ui

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"strconv"
	"strings"

	"github.com/corotask/corotask/tasks"
)

//go:embed templates static
var assets embed.FS

// templates holds one template set per page: the layout and the page's own
// file. Each page file defines "content" (the whole page body) and "live"
// (the part that live updates replace).
type templates struct {
	byPage map[string]*template.Template
}

func parseTemplates() (*templates, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("ui: parse layout: %w", err)
	}
	files, err := fs.Glob(assets, "templates/page_*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: templates: %w", err)
	}
	t := &templates{byPage: make(map[string]*template.Template)}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "templates/page_"), ".html")
		clone, err := layout.Clone()
		if err != nil {
			return nil, fmt.Errorf("ui: templates: %w", err)
		}
		if t.byPage[name], err = clone.ParseFS(assets, f); err != nil {
			return nil, fmt.Errorf("ui: parse %s: %w", f, err)
		}
	}
	return t, nil
}

// render executes the named template ("layout.html" for a whole page,
// "live" for the part live updates replace) of page.
func (t *templates) render(page, name string, v *view) ([]byte, error) {
	tmpl := t.byPage[page]
	if tmpl == nil {
		return nil, fmt.Errorf("ui: no page %q", page)
	}
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, name, v); err != nil {
		return nil, fmt.Errorf("ui: render %s: %w", page, err)
	}
	return b.Bytes(), nil
}

var funcs = template.FuncMap{
	"json":     prettyJSON,
	"short":    shortText,
	"statuses": func() []tasks.Status { return tasks.Statuses },
	"ended":    func(s string) bool { return tasks.Status(s).Ended() },
	"add":      func(a, b int) int { return a + b },
	"pct": func(n, total int64) int64 {
		if total == 0 {
			return 0
		}
		return 100 * n / total
	},
	"bar":    sparkBar,
	"rowsOf": func(v *view, rows []taskRow) rowsView { return rowsView{V: v, Rows: rows} },
	"num":    formatCount,
	"len64":  func(rows []taskRow) int64 { return int64(len(rows)) },
	"msgsOf": func(v *view, msgs []message, task tasks.ID, drop bool) msgsView {
		return msgsView{V: v, Msgs: msgs, Task: task, Drop: drop}
	},
	"execsOf": func(v *view, execs []tasks.Executor, paused map[string]pausedType) execsView {
		return execsView{V: v, Execs: execs, Paused: paused}
	},
	"nodeOf": func(v *view, n *treeNode) nodeView { return nodeView{V: v, N: n} },
	"fanin":  fanIn,
	"typeForm": func(v *view, typ string, paused bool, back string) typeForm {
		return typeForm{V: v, Type: typ, Paused: paused, Back: back}
	},
	"int64":  func(n int) int64 { return int64(n) },
	"tokens": func(f float64) string { return strconv.FormatFloat(math.Floor(f*10)/10, 'f', 1, 64) },
}

// typeForm is what the "typeAction" template (the pause or resume button
// of a type) gets: Back names the page to return to (see typeBack).
type typeForm struct {
	V      *view
	Type   string
	Paused bool
	Back   string
}

// prettyJSON indents a JSON value, or returns "" for none.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// shortText cuts s to n characters, on one line.
func shortText(n int, s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// formatCount prints n with thousands separators: 1,234,567.
func formatCount(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// rowsView is what the "rows" template (a table of tasks) gets.
type rowsView struct {
	V    *view
	Rows []taskRow
}

// HasKey says whether a task of the table has a key: the table has a key
// column only then, so that lists of tasks without keys look as before.
func (r rowsView) HasKey() bool {
	for _, t := range r.Rows {
		if t.Key != "" {
			return true
		}
	}
	return false
}

// HasPriority says whether a task of the table has a priority above the
// default: the table has a priority column only then.
func (r rowsView) HasPriority() bool {
	for _, t := range r.Rows {
		if t.Priority != 0 {
			return true
		}
	}
	return false
}

// HasLimitKey says whether a task of the table has a limit key: the table
// has a limit key column only then.
func (r rowsView) HasLimitKey() bool {
	for _, t := range r.Rows {
		if t.LimitKey != "" {
			return true
		}
	}
	return false
}

// bar is one bar of a sparkline 24 pixels high, 10 pixels per bucket.
type bar struct{ X, Y, H int64 }

// sparkBar returns the bar of bucket i, of n tasks, scaled to the largest
// of buckets.
func sparkBar(i int, n int64, buckets [12]int64) bar {
	var top int64
	for _, b := range buckets {
		top = max(top, b)
	}
	h := int64(0)
	if top > 0 && n > 0 {
		h = max(1, 24*n/top)
	}
	return bar{X: int64(i) * 10, Y: 24 - h, H: h}
}

// msgsView is what the "messages" template gets.
type msgsView struct {
	V    *view
	Msgs []message
	Task tasks.ID
	Drop bool // offer to drop each message
}

// execsView is what the "executors" template gets.
type execsView struct {
	V      *view
	Execs  []tasks.Executor
	Paused map[string]pausedType // the paused types, marked among those served
}

// nodeView is what the "node" template (one task of a tree) gets.
type nodeView struct {
	V *view
	N *treeNode
}

// fanInProgress is how many of a task's children have ended.
type fanInProgress struct{ Ended, Total int }

func fanIn(n *treeNode) fanInProgress {
	p := fanInProgress{Total: len(n.Children)}
	for _, c := range n.Children {
		if tasks.Status(c.Status).Ended() {
			p.Ended++
		}
	}
	return p
}
