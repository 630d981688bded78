package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/schedule"
	"github.com/corotask/corotask/tasks"
)

// scheduleFlags lists, for each subcommand of schedule, the flags it takes
// (besides the database flags).
var scheduleFlags = map[string][]string{
	"create":   {"type", "cron", "state", "tz", "missed", "max-missed", "no-overlap"},
	"ls":       {"json"},
	"pause":    nil,
	"resume":   nil,
	"delete":   nil,
	"backfill": {"from", "to"},
}

var scheduleCmd = &command{
	name:    "schedule",
	args:    "create|ls|pause|resume|delete|backfill [NAME]",
	summary: "create, list and control schedules",
	help: `Manage schedules: tasks of type corotask.schedule, keyed by their NAME, that
create a task of a type at each slot of a cron (see "Schedules" in the
README). Executors run them once they call schedule.Register.

  create NAME    create schedule NAME, or update it when it exists with
                 another spec (--type, --cron and the flags after them)
  ls             list the schedules: next and last slot, paused, runs
  pause NAME     run nothing until resume
  resume NAME    run again from the next slot after now
  delete NAME    end the schedule; the tasks it created live on
  backfill NAME  run each slot from --from to --to (included) that is due

--cron is 5-field cron (minute hour day-of-month month day-of-week, with *,
lists, ranges, steps and the names JAN-DEC, SUN-SAT), @hourly, @daily,
@weekly, @monthly, @yearly or "@every DURATION" (at least 1s). A slot missed
because a later one is also due is run as --missed says: skip (none), once
(the latest; the default) or all (at most --max-missed, the latest).`,
	example: `corotask schedule create nightly-report --type reports.build --cron "30 2 * * *" --tz Europe/Paris --state '{"kind": "daily"}'
corotask schedule ls
corotask schedule pause nightly-report
corotask schedule backfill nightly-report --from 2026-03-01T00:00:00Z --to 2026-03-07T00:00:00Z`,
	flags: func(fs *flag.FlagSet) runFunc {
		typ := fs.String("type", "", "create: the `TYPE` of the tasks the schedule creates (required)")
		cron := fs.String("cron", "", "create: when the schedule runs, a cron `EXPR` (required)")
		state := fs.String("state", "", "create: the initial state of each task created, a `JSON` value (default: the poller's zero value)")
		tz := fs.String("tz", "", "create: the `ZONE` of the cron, an IANA name such as Europe/Paris (default UTC)")
		missed := fs.String("missed", "once", "create: what to do with missed slots, `POLICY` skip, once or all")
		maxMissed := fs.String("max-missed", "", "create: with --missed all, the most missed slots run at once, `N` (default 100)")
		noOverlap := fs.Bool("no-overlap", false, "create: do not start a slot while the previous slot's task lives (the slot is skipped)")
		asJSON := fs.Bool("json", false, "ls: print JSON")
		from := fs.String("from", "", "backfill: the first `TIME` of the range (RFC 3339, required)")
		to := fs.String("to", "", "backfill: the last `TIME` of the range (RFC 3339, required)")
		return func(ctx context.Context, a *app, args []string) error {
			if len(args) == 0 {
				return usagef("missing SUBCOMMAND argument (create, ls, pause, resume, delete or backfill)")
			}
			sub, args := args[0], args[1:]
			allowed, ok := scheduleFlags[sub]
			if !ok {
				return usagef("unknown subcommand %q: want create, ls, pause, resume, delete or backfill", sub)
			}
			var stray error
			fs.Visit(func(f *flag.Flag) {
				if stray == nil && !slices.Contains(allowed, f.Name) && !slices.Contains(databaseFlags, f.Name) {
					stray = usagef("--%s does not go with schedule %s", f.Name, sub)
				}
			})
			if stray != nil {
				return stray
			}
			if sub == "ls" {
				if err := wantArgs(args); err != nil {
					return err
				}
				return a.withConn(ctx, func(conn *pgx.Conn) error {
					return listSchedules(ctx, a, conn, *asJSON)
				})
			}
			if err := wantArgs(args, "NAME"); err != nil {
				return err
			}
			name := args[0]
			var run func(conn *pgx.Conn) (string, error)
			switch sub {
			case "create":
				spec, err := scheduleSpec(name, *typ, *cron, *state, *tz, *missed, *maxMissed, *noOverlap)
				if err != nil {
					return err
				}
				run = func(conn *pgx.Conn) (string, error) {
					id, err := schedule.Ensure(ctx, conn, spec)
					return fmt.Sprintf("schedule %s: task %s", name, id), err
				}
			case "pause", "resume", "delete":
				op := map[string]func(context.Context, tasks.DB, string) error{
					"pause": schedule.Pause, "resume": schedule.Resume, "delete": schedule.Delete}[sub]
				run = func(conn *pgx.Conn) (string, error) {
					return fmt.Sprintf("schedule %s: %s sent", name, sub), op(ctx, conn, name)
				}
			case "backfill":
				if *from == "" || *to == "" {
					return usagef("backfill needs --from and --to")
				}
				f, err := parseTime("--from", *from)
				if err != nil {
					return err
				}
				t, err := parseTime("--to", *to)
				if err != nil {
					return err
				}
				run = func(conn *pgx.Conn) (string, error) {
					return fmt.Sprintf("schedule %s: backfill sent", name), schedule.Backfill(ctx, conn, name, f, t)
				}
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				out, err := run(conn)
				if err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, out)
				return nil
			})
		}
	},
}

// scheduleSpec makes the spec of schedule create from its flags; Ensure
// checks the rest.
func scheduleSpec(name, typ, cron, state, tz, missed, maxMissed string, noOverlap bool) (schedule.Spec, error) {
	if typ == "" || cron == "" {
		return schedule.Spec{}, usagef("create needs --type and --cron")
	}
	spec := schedule.Spec{Name: name, Type: tasks.Type(typ), Cron: cron, TimeZone: tz,
		Missed: schedule.Missed(missed), NoOverlap: noOverlap}
	if state != "" {
		st, err := parseJSON("--state", []byte(state))
		if err != nil {
			return spec, err
		}
		spec.State = st
	}
	if maxMissed != "" {
		n, err := parseCount("--max-missed", maxMissed, false)
		if err != nil {
			return spec, err
		}
		spec.MaxMissed = n
	}
	return spec, nil
}

// scheduleJSON is a schedule as ls --json prints it.
type scheduleJSON struct {
	schedule.Spec
	Task     tasks.ID   `json:"task"`
	Paused   bool       `json:"paused"`
	Next     *time.Time `json:"next"`
	LastRun  *time.Time `json:"last_run"`
	LastTask tasks.ID   `json:"last_task"`
	Runs     int        `json:"runs"`
	Skipped  int        `json:"skipped"`
}

func listSchedules(ctx context.Context, a *app, db tasks.DB, asJSON bool) error {
	all, err := schedule.List(ctx, db)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]scheduleJSON, len(all))
		for i, s := range all {
			out[i] = scheduleJSON{Spec: s.Spec, Task: s.Task, Paused: s.Paused, Next: timeOrNil(s.Next),
				LastRun: timeOrNil(s.LastRun), LastTask: s.LastTask, Runs: s.Runs, Skipped: s.Skipped}
		}
		return writeJSON(a.stdout, out)
	}
	now := time.Now()
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tCRON\tZONE\tNEXT\tLAST RUN\tPAUSED\tRUNS\tSKIPPED")
	for _, s := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", oneLine(s.Spec.Name), oneLine(string(s.Spec.Type)),
			oneLine(s.Spec.Cron), zoneName(s.Spec.TimeZone), timestamp(timeOrNil(s.Next), now),
			timestamp(timeOrNil(s.LastRun), now), strconv.FormatBool(s.Paused), s.Runs, s.Skipped)
	}
	return tw.Flush()
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func zoneName(tz string) string {
	if strings.TrimSpace(tz) == "" {
		return "UTC"
	}
	return oneLine(tz)
}
