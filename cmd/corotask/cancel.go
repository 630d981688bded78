package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

var cancelCmd = &command{
	name:    "cancel",
	args:    "TASK",
	summary: "cancel a task and its descendants",
	help: `Cancel task TASK and all its live descendants, and say how many tasks were
canceled. The task's parent, if alive, receives a completion message saying it
was canceled; polls running on canceled tasks are stopped and commit nothing.`,
	example: `corotask cancel 01JD7X3M5Q8R9S2T4V6W8Y0Z1A`,
	flags: func(fs *flag.FlagSet) runFunc {
		return func(ctx context.Context, a *app, args []string) error {
			id, err := taskArg(args)
			if err != nil {
				return err
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				n, err := tasks.CancelCount(ctx, conn, id)
				if err != nil {
					return taskError(err)
				}
				fmt.Fprintf(a.stdout, "canceled %s\n", plural(n, "task"))
				return nil
			})
		}
	},
}
