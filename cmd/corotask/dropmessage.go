package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

var dropMessageCmd = &command{
	name:    "drop-message",
	args:    "TASK POSITION",
	summary: "remove one message from a task's inbox",
	help: `Remove the message at POSITION (1: the oldest, as 'corotask show' numbers
them) from the inbox of task TASK, and print it: a message its poller cannot
handle (a poison message) stops failing the task. The message is kept in the
task's history (see 'corotask history --json'), from where it can be sent
again. A task an executor holds is refused (try again once its poll has
ended): its poll counts the inbox's positions. The action is recorded in the
task's history with your database role.`,
	example: `corotask drop-message 01JD7X3M5Q8R9S2T4V6W8Y0Z1A 1`,
	flags: func(fs *flag.FlagSet) runFunc {
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args, "TASK", "POSITION"); err != nil {
				return err
			}
			id, err := parseID("TASK", args[0])
			if err != nil {
				return err
			}
			pos, err := strconv.Atoi(args[1])
			if err != nil || pos < 1 {
				return usagef("invalid POSITION %q: want 1 for the oldest message, 2 for the next, ...", args[1])
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				msg, err := tasks.DropMessage(ctx, conn, id, pos)
				if err != nil {
					return taskError(err)
				}
				fmt.Fprintf(a.stdout, "dropped message %d of %s: %s\n", pos, id, compactJSON(msg))
				return nil
			})
		}
	},
}
