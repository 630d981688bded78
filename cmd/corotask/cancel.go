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
	args:    taskRefArgs,
	summary: "cancel a task and its descendants",
	help: `Cancel task TASK and all its live descendants, and say how many tasks were
canceled. The task's parent, if alive, receives a completion message saying it
was canceled; polls running on canceled tasks are stopped and commit nothing.
With --type and --key instead of TASK, cancel the live task of that type with
that key.`,
	example: `corotask cancel 01JD7X3M5Q8R9S2T4V6W8Y0Z1A
corotask cancel --type orders.checkout --key order-42`,
	flags: func(fs *flag.FlagSet) runFunc {
		ref := taskRefFlags(fs, "cancel")
		return func(ctx context.Context, a *app, args []string) error {
			if _, err := ref.parse(args); err != nil {
				return err
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				var n int
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					id, err := ref.resolve(ctx, tx)
					if err != nil {
						return err
					}
					n, err = tasks.CancelCount(ctx, tx, id)
					return err
				})
				if err != nil {
					return taskError(err)
				}
				fmt.Fprintf(a.stdout, "canceled %s\n", plural(n, "task"))
				return nil
			})
		}
	},
}
