package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/humantime"
	"github.com/corotask/corotask/tasks"
)

// statsJSON is one type's counts as `stats --json` prints them.
type statsJSON struct {
	Type           tasks.Type     `json:"type"`
	Counts         map[string]int `json:"counts"` // every status present
	OldestReadySec float64        `json:"oldest_ready_sec"`
}

var statsCmd = &command{
	name:    "stats",
	summary: "count tasks by type and status",
	help: `Count the tasks of each type in each status, and say how long the oldest
ready task of each type has been due (OLDEST_READY: the lag an autoscaler
reads; unserved tasks count as ready). It reads every task, ended ones
included, so it costs a scan of the table. With --json, print a JSON array
(see docs/cli.md).`,
	example: `corotask stats
corotask stats --json | jq '.[] | select(.oldest_ready_sec > 60) | .type'`,
	flags: func(fs *flag.FlagSet) runFunc {
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args); err != nil {
				return err
			}
			var all []tasks.TypeStats
			err := a.withConn(ctx, func(conn *pgx.Conn) error {
				var err error
				all, err = tasks.Stats(ctx, conn)
				return err
			})
			if err != nil {
				return err
			}
			if *asJSON {
				out := make([]statsJSON, 0, len(all))
				for _, s := range all {
					j := statsJSON{Type: s.Type, Counts: map[string]int{}, OldestReadySec: s.OldestReady.Seconds()}
					for _, st := range tasks.Statuses {
						j.Counts[string(st)] = s.Counts[st]
					}
					out = append(out, j)
				}
				return writeJSON(a.stdout, out)
			}
			if len(all) == 0 {
				fmt.Fprintln(a.stdout, "no tasks")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprint(tw, "TYPE\t")
			for _, st := range tasks.Statuses {
				fmt.Fprintf(tw, "%s\t", upper(string(st)))
			}
			fmt.Fprintln(tw, "OLDEST_READY")
			for _, s := range all {
				fmt.Fprintf(tw, "%s\t", oneLine(string(s.Type)))
				for _, st := range tasks.Statuses {
					fmt.Fprintf(tw, "%d\t", s.Counts[st])
				}
				oldest := "-"
				if s.OldestReady > 0 {
					oldest = humantime.Duration(s.OldestReady)
				}
				fmt.Fprintln(tw, oldest)
			}
			return tw.Flush()
		}
	},
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
