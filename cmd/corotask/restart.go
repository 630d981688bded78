package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

var restartCmd = &command{
	name:    "restart",
	args:    "TASK",
	summary: "bring a failed task back to life",
	help: `Restart task TASK, which failed for good (its type's MaxFailures): it lives
again, ready now, with its last committed state, its inbox, and no failures.
Its parent was told of the failure and is not told of the restart; when the
task ends again the parent receives another completion message. Only a failed
task whose parent (if any) is alive can be restarted. The action is recorded in the task's
history with your database role.`,
	example: `corotask restart 01JD7X3M5Q8R9S2T4V6W8Y0Z1A`,
	flags: func(fs *flag.FlagSet) runFunc {
		return func(ctx context.Context, a *app, args []string) error {
			id, err := taskArg(args)
			if err != nil {
				return err
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				if err := tasks.Restart(ctx, conn, id); err != nil {
					return taskError(err)
				}
				fmt.Fprintf(a.stdout, "restarted %s: ready now\n", id)
				return nil
			})
		}
	},
}
