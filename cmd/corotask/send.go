package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// isTerminal says whether r is a terminal (a character device), which a
// person types into.
func isTerminal(r io.Reader) bool {
	f, ok := r.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// maxInput bounds what send reads from standard input; the database refuses
// bodies over tasks.MaxMessageBytes anyway.
const maxInput = 8 * tasks.MaxMessageBytes

var sendCmd = &command{
	name:    "send",
	args:    "TASK [JSON]",
	summary: "send a message to a task",
	help: `Send a message to task TASK, which wakes it if it sleeps or is suspended.
The body is the JSON argument or, when it is "-" or missing, standard input.
A message to an unknown or ended task is refused. The message is recorded in
the task's history with your database role.`,
	example: `corotask send 01JD7X3M5Q8R9S2T4V6W8Y0Z1A '{"approved": true}'
echo '"ping"' | corotask send --from 01JD7X2A0B1C2D3E4F5G6H7J8K 01JD7X3M5Q8R9S2T4V6W8Y0Z1A`,
	flags: func(fs *flag.FlagSet) runFunc {
		from := fs.String("from", "", "the sending `TASK`, which must exist (default: from outside any task)")
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args, "TASK", "[JSON]"); err != nil {
				return err
			}
			to, err := parseID("TASK", args[0])
			if err != nil {
				return err
			}
			sender, err := parseOptionalID("--from", *from)
			if err != nil {
				return err
			}
			var data []byte
			if len(args) == 2 && args[1] != "-" {
				data = []byte(args[1])
			} else {
				if isTerminal(a.stdin) {
					fmt.Fprintln(a.stderr, "corotask send: reading the message body (one JSON value) from standard input; end it with Ctrl-D")
				}
				if data, err = io.ReadAll(io.LimitReader(a.stdin, maxInput+1)); err != nil {
					return fmt.Errorf("read standard input: %w", err)
				}
				if len(data) > maxInput {
					return usagef("message on standard input is larger than %d bytes", maxInput)
				}
			}
			body, err := parseJSON("message", data)
			if err != nil {
				return err
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					if !sender.IsZero() {
						var exists bool
						if err := tx.QueryRow(ctx, query.TaskExists, sender).Scan(&exists); err != nil {
							return err
						}
						if !exists {
							return fmt.Errorf("--from %w: %s", tasks.ErrNotFound, sender)
						}
					}
					return inbox.SendAsOperator(ctx, tx, to, sender, body)
				})
				if err != nil {
					return sendError(err)
				}
				if sender.IsZero() {
					fmt.Fprintf(a.stdout, "sent message to %s\n", to)
				} else {
					fmt.Fprintf(a.stdout, "sent message to %s from %s\n", to, sender)
				}
				return nil
			})
		}
	},
}

// sendError is taskError, with what to grant when the role may not call
// operator_send (a grant made before schema 7 does not cover it).
func sendError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" && strings.Contains(pgErr.Message, "operator_send") {
		return fmt.Errorf("%w (corotask send records the message in the task's history: "+
			"GRANT EXECUTE ON FUNCTION corotask.operator_send(uuid, uuid, jsonb, jsonb) TO the role; see docs/operations.md)", err)
	}
	return taskError(err)
}
