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
	args:    taskRefArgs,
	summary: "bring a failed task back to life",
	help: `Restart task TASK, which failed for good (its type's MaxFailures): it lives
again, ready now, with its last committed state, its inbox, and no failures.
Its parent was told of the failure and is not told of the restart; when the
task ends again the parent receives another completion message. Only a failed
task whose parent (if any) is alive can be restarted. The action is recorded in the task's
history with your database role. With --type and --key instead of TASK,
restart the last task of that type with that key that failed (a failed task
no longer holds its key; restarting it is refused while another live task of
the type has the key).`,
	example: `corotask restart 01JD7X3M5Q8R9S2T4V6W8Y0Z1A
corotask restart --type orders.checkout --key order-42`,
	flags: func(fs *flag.FlagSet) runFunc {
		ref := taskRefFailedFlags(fs, "restart")
		return func(ctx context.Context, a *app, args []string) error {
			if _, err := ref.parse(args); err != nil {
				return err
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				var id tasks.ID
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) (err error) {
					if id, err = ref.resolve(ctx, tx); err != nil {
						return err
					}
					return tasks.Restart(ctx, tx, id)
				})
				if err != nil {
					return taskError(err)
				}
				fmt.Fprintf(a.stdout, "restarted %s: ready now\n", id)
				return nil
			})
		}
	},
}
