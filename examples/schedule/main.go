// Command schedule runs a schedule: every -every (default 2s) it creates a
// task that builds a report, as a child of the schedule, and prints each
// report as its task ends; after -n reports (default 3) it deletes the
// schedule and stops.
//
//	go run ./examples/schedule
//
// connects to $DATABASE_URL, else to the database corotask on the server on
// 127.0.0.1:5432 as user postgres (created when missing), and prints, for
// example,
//
//	schedule demo.reports: a reports.build task every 2s (task 01M8CWVCP18DPRQY4P6VDCHSY4)
//	report 1 for slot 2026-11-26T21:40:42Z: 3 items
//	report 2 for slot 2026-11-26T21:40:44Z: 3 items
//	report 3 for slot 2026-11-26T21:40:46Z: 3 items
//	schedule demo.reports deleted
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/schedule"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// scheduleName names the schedule; reportType is the type of the tasks it
// creates.
const (
	scheduleName = "demo.reports"
	reportType   = "reports.build"
)

// report is a report task's state: what the schedule gives each task.
type report struct {
	Items []string `json:"items"`
}

// build is the poller of reports: one poll builds the report and ends.
func build(ctx context.Context, t *executor.Task[report, json.RawMessage]) (executor.Action, error) {
	return executor.DoneWith(len(t.State.Items)), nil
}

type config struct {
	url   string
	every time.Duration
	n     int
}

func main() {
	var cfg config
	flag.DurationVar(&cfg.every, "every", 2*time.Second, "how often the schedule creates a report (at least 1s)")
	flag.IntVar(&cfg.n, "n", 3, "how many reports to wait for")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg.url = os.Getenv("DATABASE_URL")
	if cfg.url == "" { // the CLI's default too: a database of its own, created when missing
		cfg.url = "postgres://postgres@127.0.0.1:5432/corotask"
		if _, err := corosql.EnsureDatabase(ctx, cfg.url); err != nil {
			log.Fatal(err)
		}
	}
	if err := run(ctx, cfg, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.n < 1 {
		return fmt.Errorf("-n %d: want at least one report", cfg.n)
	}
	pool, err := pgxpool.New(ctx, cfg.url)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := corosql.Migrate(ctx, pool); err != nil {
		return err
	}
	e, err := executor.New(pool, executor.Config{})
	if err != nil {
		return err
	}
	schedule.Register(e)                                                                  // this executor runs schedules ...
	executor.Register(e, reportType, executor.PollerFunc[report, json.RawMessage](build)) // ... and reports
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	ran := make(chan error, 1)
	go func() { ran <- e.Run(runCtx) }()

	// Idempotent by name: every process that starts may ensure it.
	id, err := schedule.Ensure(ctx, pool, schedule.Spec{
		Name: scheduleName, Type: reportType, State: json.RawMessage(`{"items": ["sales", "stock", "returns"]}`),
		Cron: "@every " + cfg.every.String(),
	})
	if err != nil {
		stopRun()
		return errors.Join(err, <-ran)
	}
	fmt.Fprintf(out, "schedule %s: a %s task every %s (task %s)\n", scheduleName, reportType, cfg.every, id)

	err = printReports(ctx, pool, id, cfg.n, out)
	if err == nil {
		err = schedule.Delete(ctx, pool, scheduleName)
	}
	if err == nil { // the schedule's task ends at its next poll
		_, err = tasks.Wait(ctx, pool, id)
	}
	if err == nil {
		fmt.Fprintf(out, "schedule %s deleted\n", scheduleName)
	}
	stopRun()
	return errors.Join(err, <-ran)
}

// printReports waits for n reports of schedule id to end, and prints each,
// oldest first.
func printReports(ctx context.Context, pool *pgxpool.Pool, id tasks.ID, n int, out io.Writer) error {
	printed := map[tasks.ID]bool{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for len(printed) < n {
		children, err := tasks.List(ctx, pool, tasks.Filter{Parent: id, Status: tasks.StatusDone, Limit: 1000})
		if err != nil {
			return err
		}
		for i := len(children) - 1; i >= 0 && len(printed) < n; i-- { // the oldest first
			c := children[i]
			if printed[c.ID] {
				continue
			}
			printed[c.ID] = true
			_, slot, _ := strings.Cut(c.Key, "@")
			fmt.Fprintf(out, "report %d for slot %s: %s items\n", len(printed), slot, c.Result)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
