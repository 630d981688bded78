package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

var lsCmd = &command{
	name:    "ls",
	summary: "list tasks",
	help: `List tasks, oldest first: ID, type, status, when the task wants its next
poll (WAKE), the age of its executor's heartbeat when it is running, the
messages in its inbox and in inbox_next (NEXT), and its consecutive failures.
With --json, print a JSON array of task objects instead (see docs/cli.md).
At most --limit tasks are listed; pass the last ID to --after for the next page.`,
	example: `corotask ls --status suspended --type orders.checkout
corotask ls --parent 01JD7X3M5Q8R9S2T4V6W8Y0Z1A --json`,
	flags: func(fs *flag.FlagSet) runFunc {
		typ := fs.String("type", "", "only tasks of `TYPE`")
		status := fs.String("status", "", "only tasks in `STATUS`: ready, sleeping, suspended, running, done, failed or canceled")
		parent := fs.String("parent", "", "only the children of `TASK`")
		after := fs.String("after", "", "only tasks after `TASK` in ID order (the next page)")
		limit := fs.String("limit", strconv.Itoa(tasks.DefaultListLimit), fmt.Sprintf("list at most `N` tasks (default %d)", tasks.DefaultListLimit))
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args); err != nil {
				return err
			}
			f := tasks.Filter{Type: tasks.Type(*typ)}
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
			fmt.Fprintln(tw, "ID\tTYPE\tSTATUS\tWAKE\tHEARTBEAT\tINBOX\tNEXT\tFAILURES")
			for _, t := range list {
				hb := &t.Heartbeat
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", t.ID, oneLine(string(t.Type)), t.Status,
					relative(t.WakeAt, now), relative(hb, now), t.InboxLen, t.InboxNextLen, t.Failures)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(list) == f.Limit {
				fmt.Fprintf(a.stderr, "(%d tasks shown, there may be more: --after %s for the next page)\n", len(list), list[len(list)-1].ID)
			}
			return nil
		}
	},
}
