package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

// executorJSON is a registered executor as `executors --json` prints it.
type executorJSON struct {
	ID          tasks.ID     `json:"id"`
	Host        string       `json:"host"`
	PID         int          `json:"pid"`
	Version     string       `json:"version"`
	Types       []tasks.Type `json:"types"`
	Concurrency int          `json:"concurrency"`
	Claims      int          `json:"claims"`
	StartedAt   time.Time    `json:"started_at"`
	LastSeen    time.Time    `json:"last_seen"`
	ExpiresAt   time.Time    `json:"expires_at"`
	Stale       bool         `json:"stale"`
	StoppedAt   *time.Time   `json:"stopped_at"`
	// PausedTypes are those of its types that are paused (see 'corotask
	// pause').
	PausedTypes []tasks.Type `json:"paused_types"`
}

var executorsCmd = &command{
	name:    "executors",
	summary: "list the executors serving tasks",
	help: `List the executors registered in the database, oldest first: their ID,
host and process, corotask version, the task types they serve, their
concurrency, how many tasks they hold a claim on now, when they started and
when they were last seen. A running executor (live) refreshes its
registration about every heartbeat interval and marks it stopped when it stops
gracefully; one not seen for three heartbeat timeouts is stale (it died or
stalled: its claims expire and other executors take its tasks over).
Registrations are deleted after the executors' retention of ended tasks (7
days by default), so that task histories name the executors that ran them.
A type that is paused (see 'corotask pause') is marked "(paused)": no
executor claims its tasks. With --json, print a JSON array (see
docs/cli.md).`,
	example: `corotask executors`,
	flags: func(fs *flag.FlagSet) runFunc {
		asJSON := fs.Bool("json", false, "print JSON")
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args); err != nil {
				return err
			}
			var all []tasks.Executor
			var now time.Time
			paused := map[tasks.Type]bool{}
			err := a.readSnapshot(ctx, func(tx pgx.Tx, txNow time.Time) error {
				now = txNow
				var err error
				if all, err = tasks.Executors(ctx, tx); err != nil {
					return err
				}
				c, err := tasks.Controls(ctx, tx)
				for _, t := range c.Types {
					paused[t.Type] = t.Paused()
				}
				return err
			})
			if err != nil {
				return err
			}
			if *asJSON {
				out := make([]executorJSON, 0, len(all))
				for _, x := range all {
					j := executorJSON{ID: x.ID, Host: x.Host, PID: x.PID, Version: x.Version, Types: x.Types,
						Concurrency: x.Concurrency, Claims: x.Claims, StartedAt: x.StartedAt, LastSeen: x.LastSeen,
						ExpiresAt: x.ExpiresAt, Stale: x.Stale, StoppedAt: x.StoppedAt, PausedTypes: []tasks.Type{}}
					for _, t := range x.Types {
						if paused[t] {
							j.PausedTypes = append(j.PausedTypes, t)
						}
					}
					out = append(out, j)
				}
				return writeJSON(a.stdout, out)
			}
			if len(all) == 0 {
				fmt.Fprintln(a.stdout, "no executors registered")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tHOST\tPID\tVERSION\tSTATE\tCLAIMS\tCONCURRENCY\tSTARTED\tLAST_SEEN\tTYPES")
			for _, x := range all {
				state := "live"
				switch {
				case x.StoppedAt != nil:
					state = "stopped"
				case x.Stale:
					state = "stale"
				}
				types := make([]string, len(x.Types))
				for i, t := range x.Types {
					types[i] = oneLine(string(t))
					if paused[t] {
						types[i] += " (paused)"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", x.ID, oneLine(x.Host), x.PID, oneLine(x.Version),
					state, x.Claims, x.Concurrency, relative(&x.StartedAt, now), relative(&x.LastSeen, now), strings.Join(types, ","))
			}
			return tw.Flush()
		}
	},
}
