package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

var priorityCmd = &command{
	name:    "priority",
	args:    taskRefArgs + " N",
	summary: "set the priority of a task",
	help: `Set the priority of task TASK to N, from 0 (the default, the lowest) to
32767: executors claim the ready tasks of a type by priority, the highest
first, then the oldest. An ended task is refused, and one an executor holds
(try again once its poll has ended). The action is recorded in the task's
history and in corotask.control_history with your database role, with the
priority it replaced. With --type and --key instead of TASK, set the
priority of the live task of that type with that key.`,
	example: `corotask priority 01JD7X3M5Q8R9S2T4V6W8Y0Z1A 10
corotask priority --type orders.checkout --key order-42 100`,
	flags: func(fs *flag.FlagSet) runFunc {
		ref := taskRefFlags(fs, "set the priority of")
		return func(ctx context.Context, a *app, args []string) error {
			rest, err := ref.parse(args, "N")
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(rest[0])
			if err != nil || n < 0 || n > tasks.MaxPriority {
				return usagef("invalid N %q: want a priority from 0 (the lowest) to %d", rest[0], tasks.MaxPriority)
			}
			var id tasks.ID
			var was int
			err = a.withConn(ctx, func(conn *pgx.Conn) error {
				return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) (err error) {
					if id, err = ref.resolve(ctx, tx); err != nil {
						return err
					}
					t, err := tasks.Get(ctx, tx, id)
					if err != nil {
						return err
					}
					was = t.Priority
					return tasks.SetPriority(ctx, tx, id, n)
				})
			})
			if err != nil {
				return controlError(err)
			}
			fmt.Fprintf(a.stdout, "priority of %s: %d (was %d)\n", id, n, was)
			return nil
		}
	},
}
