package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

var keyWindowCmd = &command{
	name:    "key-window",
	args:    "TYPE [DURATION]",
	summary: "keep a type's keys reserved after their task ends",
	help: `Set how long a key of tasks of type TYPE stays reserved after its task has
ended (done, failed or canceled): within DURATION of that end, creating a
task of TYPE with the key is refused, naming the ended task, and sending to
the key is refused as a send to an ended task, so that a producer that
retries does not start a second task. DURATION is a Go duration (90s, 24h);
0 removes the window. Without DURATION, print the type's window. Deleting
the ended task (retention) ends its window early.`,
	example: `corotask key-window orders.checkout 24h
corotask key-window orders.checkout
corotask key-window orders.checkout 0`,
	flags: func(fs *flag.FlagSet) runFunc {
		return func(ctx context.Context, a *app, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("want TYPE [DURATION]")
			}
			typ := tasks.Type(args[0])
			if err := typ.Validate(); err != nil {
				return usagef("%v", err)
			}
			set := len(args) == 2
			var d time.Duration
			if set {
				var err error
				if d, err = time.ParseDuration(args[1]); err != nil {
					return usagef("invalid DURATION %q: want a Go duration such as 90s or 24h, 0 to remove", args[1])
				}
				if d < 0 {
					return usagef("invalid DURATION %q: negative (0 removes the window)", args[1])
				}
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				if set {
					if err := tasks.SetKeyWindow(ctx, conn, typ, d); err != nil {
						return err
					}
				} else {
					var err error
					if d, err = tasks.KeyWindow(ctx, conn, typ); err != nil {
						return err
					}
				}
				if d == 0 {
					fmt.Fprintf(a.stdout, "key window of %s: none\n", typ)
				} else {
					fmt.Fprintf(a.stdout, "key window of %s: %s\n", typ, d)
				}
				return nil
			})
		}
	},
}
