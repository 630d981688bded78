package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

var retryCmd = &command{
	name:    "retry",
	args:    taskRefArgs,
	summary: "poll a retrying or sleeping task now",
	help: `Make task TASK, which waits out the backoff of a failed poll (retrying) or
sleeps, ready now: the next executor to claim its type polls it. Its count of
failures is kept unless --reset-failures, which sets it back to 0 so that its
type's MaxFailures counts anew. A task an executor holds is refused (try again
once its poll has ended), as are ended, ready and suspended tasks. The action
is recorded in the task's history with your database role. With --type and
--key instead of TASK, retry the live task of that type with that key.`,
	example: `corotask retry 01JD7X3M5Q8R9S2T4V6W8Y0Z1A
corotask retry --reset-failures 01JD7X3M5Q8R9S2T4V6W8Y0Z1A
corotask retry --type orders.checkout --key order-42`,
	flags: func(fs *flag.FlagSet) runFunc {
		reset := fs.Bool("reset-failures", false, "also set the task's failures back to 0")
		ref := taskRefFlags(fs, "retry")
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
					if *reset {
						if err := tasks.ResetFailures(ctx, tx, id); err != nil {
							return err
						}
					}
					return tasks.Retry(ctx, tx, id)
				})
				if err != nil {
					return taskError(err)
				}
				what := "retrying"
				if *reset {
					what = "reset failures of, and retrying"
				}
				fmt.Fprintf(a.stdout, "%s %s now\n", what, id)
				return nil
			})
		}
	},
}
