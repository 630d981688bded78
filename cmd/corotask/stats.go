package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
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
	// The type's controls (see 'corotask limit'): whether it is paused, its
	// maximum of running polls (null: none) and the polls counted toward
	// it, and its ready tasks that the controls hold back.
	Paused          bool `json:"paused"`
	MaxRunning      *int `json:"max_running"`
	RunningCounted  int  `json:"running_counted"`
	WaitingOnLimits int  `json:"waiting_on_limits"`
}

var statsCmd = &command{
	name:    "stats",
	summary: "count tasks by type and status",
	help: `Count the tasks of each type in each status, and say how long the oldest
ready task of each type has been due (OLDEST_READY: the lag an autoscaler
reads; unserved tasks count as ready). CONTROLS says what flow control does
to the type (see 'corotask limit'): paused, the polls running out of its
maximum (running 2/5), and how many ready tasks the controls hold back
(waiting). It reads every task, ended ones included, so it costs a scan of
the table. With --json, print a JSON array (see docs/cli.md).`,
	example: `corotask stats
corotask stats --json | jq '.[] | select(.oldest_ready_sec > 60) | .type'`,
	flags: func(fs *flag.FlagSet) runFunc {
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args); err != nil {
				return err
			}
			var all []tasks.TypeStats
			var controls tasks.FlowControls
			err := a.withConn(ctx, func(conn *pgx.Conn) error {
				var err error
				if all, err = tasks.Stats(ctx, conn); err != nil {
					return err
				}
				controls, err = tasks.Controls(ctx, conn)
				return err
			})
			if err != nil {
				return err
			}
			all = withControlledTypes(all, controls)
			if *asJSON {
				out := make([]statsJSON, 0, len(all))
				for _, s := range all {
					j := statsJSON{Type: s.Type, Counts: map[string]int{}, OldestReadySec: s.OldestReady.Seconds()}
					if c, ok := controls.Type(s.Type); ok {
						j.Paused, j.RunningCounted, j.WaitingOnLimits = c.Paused(), c.Running, c.Waiting
						if c.MaxRunning > 0 {
							j.MaxRunning = &c.MaxRunning
						}
					}
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
			fmt.Fprintln(tw, "OLDEST_READY\tCONTROLS")
			for _, s := range all {
				fmt.Fprintf(tw, "%s\t", oneLine(string(s.Type)))
				for _, st := range tasks.Statuses {
					fmt.Fprintf(tw, "%d\t", s.Counts[st])
				}
				oldest := "-"
				if s.OldestReady > 0 {
					oldest = humantime.Duration(s.OldestReady)
				}
				fmt.Fprintf(tw, "%s\t%s\n", oldest, controlsCell(controls, s.Type))
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

// withControlledTypes adds to all, sorted by type, the types that have
// controls and no task.
func withControlledTypes(all []tasks.TypeStats, c tasks.FlowControls) []tasks.TypeStats {
	has := map[tasks.Type]bool{}
	for _, s := range all {
		has[s.Type] = true
	}
	for _, t := range c.Types {
		if !has[t.Type] {
			all = append(all, tasks.TypeStats{Type: t.Type, Counts: map[tasks.Status]int{}})
		}
	}
	slices.SortFunc(all, func(a, b tasks.TypeStats) int { return cmp.Compare(a.Type, b.Type) })
	return all
}

// controlsCell says what flow control does to typ: "paused, running 2/5,
// 3 waiting", or "-".
func controlsCell(c tasks.FlowControls, typ tasks.Type) string {
	t, ok := c.Type(typ)
	if !ok {
		return "-"
	}
	var parts []string
	if t.Paused() {
		parts = append(parts, "paused")
	}
	if t.MaxRunning > 0 {
		parts = append(parts, fmt.Sprintf("running %d/%d", t.Running, t.MaxRunning))
	}
	if t.KeySpace != "" {
		parts = append(parts, "key space "+oneLine(t.KeySpace))
	}
	if t.RateLimit != "" {
		parts = append(parts, "rate limit "+oneLine(t.RateLimit))
	}
	parts = append(parts, fmt.Sprintf("%d waiting", t.Waiting))
	return strings.Join(parts, ", ")
}
