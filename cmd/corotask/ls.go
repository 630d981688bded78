package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

var lsCmd = &command{
	name:    "ls",
	summary: "list tasks",
	help: `List tasks, newest first: ID, type, key (when a task listed has one),
priority (when a task listed has one above 0), limit key (when a task listed
has one: its key in its type's key space, see 'corotask limit'), status,
when the task was created and last updated (claimed, polled, acted on or
ended), when it wants its next poll (WAKE), the age of its executor's
heartbeat when it is running, the messages in its inbox and in inbox_next
(NEXT), and its consecutive failures. --failing lists the tasks whose last
poll failed and those that failed for good. With --json, print a JSON array
of task objects instead (see docs/cli.md). At most --limit tasks are
listed; pass the last ID to --before for the next page.`,
	example: `corotask ls --status suspended --type orders.checkout
corotask ls --failing
corotask ls --key order-42
corotask ls --parent 01JD7X3M5Q8R9S2T4V6W8Y0Z1A --json`,
	flags: func(fs *flag.FlagSet) runFunc {
		typ := fs.String("type", "", "only tasks of `TYPE`")
		status := fs.String("status", "", "only tasks in `STATUS`: ready, paused, limited, unserved, sleeping, retrying, suspended, running, stale, done, failed or canceled")
		failing := fs.Bool("failing", false, "only tasks whose last poll failed, or that failed for good")
		parent := fs.String("parent", "", "only the children of `TASK`")
		key := fs.String("key", "", "only tasks with `KEY` (of any type, live or ended)")
		before := fs.String("before", "", "only tasks created before `TASK` (the next page)")
		after := fs.String("after", "", "only tasks created after `TASK`")
		limit := fs.String("limit", strconv.Itoa(tasks.DefaultListLimit), fmt.Sprintf("list at most `N` tasks (default %d)", tasks.DefaultListLimit))
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args); err != nil {
				return err
			}
			f := tasks.Filter{Type: tasks.Type(*typ), Failing: *failing, NewestFirst: true}
			if isSet(fs, "key") {
				if err := tasks.ValidateKey(*key); err != nil {
					return usagef("--key: %v", err)
				}
				f.Key = *key
			}
			var err error
			if *status != "" {
				s, err := tasks.ParseStatus(*status)
				if err != nil {
					return usagef("--status: %v", err)
				}
				f.Status = s
			}
			if f.Parent, err = parseOptionalID("--parent", *parent); err != nil {
				return err
			}
			if f.After, err = parseOptionalID("--after", *after); err != nil {
				return err
			}
			if f.Before, err = parseOptionalID("--before", *before); err != nil {
				return err
			}
			if f.Limit, err = parseCount("--limit", *limit, false); err != nil {
				return err
			}
			var list []*tasks.Task
			var now time.Time
			err = a.readSnapshot(ctx, func(tx pgx.Tx, txNow time.Time) error {
				now = txNow
				list, err = tasks.List(ctx, tx, f)
				return err
			})
			if err != nil {
				return err
			}
			if *asJSON {
				out := make([]taskJSON, 0, len(list))
				for _, t := range list {
					out = append(out, toJSON(t))
				}
				return writeJSON(a.stdout, out)
			}
			if len(list) == 0 {
				fmt.Fprintln(a.stdout, "no tasks")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			// The KEY, PRIORITY and LIMIT_KEY columns are there when a
			// task listed has a key, a priority above 0, a limit key.
			var extra []lsColumn
			for _, c := range lsOptionalColumns {
				if slices.ContainsFunc(list, c.shown) {
					extra = append(extra, c)
				}
			}
			header := "ID\tTYPE\t"
			for _, c := range extra {
				header += c.name + "\t"
			}
			fmt.Fprintln(tw, header+"STATUS\tCREATED\tUPDATED\tWAKE\tHEARTBEAT\tINBOX\tNEXT\tFAILURES")
			for _, t := range list {
				hb := &t.Heartbeat
				cells := ""
				for _, c := range extra {
					cells += c.cell(t) + "\t"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", t.ID, oneLine(string(t.Type)), cells, oneLine(string(t.Status)),
					relative(&t.CreatedAt, now), relative(&t.UpdatedAt, now),
					relative(t.WakeAt, now), relative(hb, now), t.InboxLen, t.InboxNextLen, t.Failures)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(list) == f.Limit {
				fmt.Fprintf(a.stderr, "(%d tasks shown, there may be more: --before %s for the next page)\n", len(list), list[len(list)-1].ID)
			}
			return nil
		}
	},
}

// lsColumn is a column ls shows when a task listed has something to say
// in it: shown says whether t does, cell is its cell.
type lsColumn struct {
	name  string
	shown func(t *tasks.Task) bool
	cell  func(t *tasks.Task) string
}

// lsOptionalColumns are ls's optional columns, in order. A column of
// priorities full of 0s, or of limit keys full of dashes, says nothing:
// most tasks have neither.
var lsOptionalColumns = []lsColumn{
	{"KEY", func(t *tasks.Task) bool { return t.Key != "" },
		func(t *tasks.Task) string { return cmp.Or(oneLine(t.Key), "-") }},
	{"PRIORITY", func(t *tasks.Task) bool { return t.Priority > 0 },
		func(t *tasks.Task) string { return strconv.Itoa(t.Priority) }},
	{"LIMIT_KEY", func(t *tasks.Task) bool { return t.LimitKey != "" },
		func(t *tasks.Task) string { return cmp.Or(oneLine(t.LimitKey), "-") }},
}
