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
	args:    "(TASK | --type TYPE --key KEY) [JSON]",
	summary: "send a message to a task",
	help: `Send a message to task TASK, which wakes it if it sleeps or is suspended.
The body is the JSON argument or, when it is "-" or missing, standard input.
A message to an unknown or ended task is refused. The message is recorded in
the task's history with your database role.

With --type and --key instead of TASK, send it to the live task of that type
with that key, creating it first (with --state as its initial state) when
there is none; a message to a task created so is its first and is not
recorded in its history.`,
	example: `corotask send 01JD7X3M5Q8R9S2T4V6W8Y0Z1A '{"approved": true}'
echo '"ping"' | corotask send --from 01JD7X2A0B1C2D3E4F5G6H7J8K 01JD7X3M5Q8R9S2T4V6W8Y0Z1A
corotask send --type carts.cart --key user-7 --state '{"items": []}' '{"add": "apple"}'`,
	flags: func(fs *flag.FlagSet) runFunc {
		from := fs.String("from", "", "the sending `TASK`, which must exist (default: from outside any task)")
		typ := fs.String("type", "", "with --key: the `TYPE` of the task to send to (or to create)")
		key := fs.String("key", "", "send to the live task of --type with this `KEY`, creating it when there is none")
		state := fs.String("state", "", "with --key: the initial state of a task created, a `JSON` value (default: the poller's zero value)")
		return func(ctx context.Context, a *app, args []string) error {
			byKey := isSet(fs, "key")
			var to tasks.ID
			if byKey {
				if err := wantArgs(args, "[JSON]"); err != nil {
					return err
				}
				if *typ == "" {
					return usagef("--key needs --type")
				}
				if err := tasks.Type(*typ).Validate(); err != nil {
					return usagef("--type: %v", err)
				}
				if err := tasks.ValidateKey(*key); err != nil {
					return usagef("--key: %v", err)
				}
				if *from != "" {
					return usagef("--from does not go with --key: a message by key comes from outside any task")
				}
			} else {
				if *typ != "" || *state != "" {
					return usagef("--type and --state go with --key")
				}
				if err := wantArgs(args, "TASK", "[JSON]"); err != nil {
					return err
				}
				var err error
				if to, err = parseID("TASK", args[0]); err != nil {
					return err
				}
				args = args[1:]
			}
			sender, err := parseOptionalID("--from", *from)
			if err != nil {
				return err
			}
			var initial any
			if *state != "" {
				if initial, err = parseJSON("--state", []byte(*state)); err != nil {
					return err
				}
			}
			var data []byte
			if len(args) == 1 && args[0] != "-" {
				data = []byte(args[0])
			} else {
				if isTerminal(a.stdin) {
					fmt.Fprintln(a.stderr, "corotask send: reading the message body (one JSON value) from standard input; end it with Ctrl-D")
				}
				if data, err = readBounded(a.stdin, "message", "standard input", maxInput); err != nil {
					return err
				}
			}
			body, err := parseJSON("message", data)
			if err != nil {
				return err
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					if byKey {
						to, err = sendToKey(ctx, tx, tasks.Type(*typ), *key, body, initial)
						return err
					}
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
				switch {
				case err != nil:
					return sendError(err)
				case byKey:
					fmt.Fprintf(a.stdout, "sent message to %s (type %s, key %s)\n", to, *typ, oneLine(*key))
				case sender.IsZero():
					fmt.Fprintf(a.stdout, "sent message to %s\n", to)
				default:
					fmt.Fprintf(a.stdout, "sent message to %s from %s\n", to, sender)
				}
				return nil
			})
		}
	},
}

// sendToKey sends body to the live task of type typ with key key in tx, as
// an operator (recorded in its history) when there is one, else creating
// it with state initial and body as its first message (see
// inbox.SendToKey, which also covers a task created meanwhile). A task that
// ends before the operator's send reaches it leaves its key free: the send
// is then undone (a savepoint) and the key's new task created. It returns
// the task's ID.
func sendToKey(ctx context.Context, tx pgx.Tx, typ tasks.Type, key string, body, initial any) (tasks.ID, error) {
	t, err := tasks.GetByKey(ctx, tx, typ, key)
	switch {
	case err == nil:
		sent, err := sendAsOperatorTo(ctx, tx, t.ID, body)
		if sent || err != nil {
			return t.ID, err
		}
		return inbox.SendToKey(ctx, tx, typ, key, body, initial)
	case errors.Is(err, tasks.ErrNotFound):
		return inbox.SendToKey(ctx, tx, typ, key, body, initial)
	default:
		return tasks.ID{}, err
	}
}

// sendAsOperatorTo sends body to id as an operator, in a savepoint of tx,
// and reports whether it did: not when the task has ended (no error then).
func sendAsOperatorTo(ctx context.Context, tx pgx.Tx, id tasks.ID, body any) (bool, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return false, err
	}
	err = inbox.SendAsOperator(ctx, sp, id, tasks.ID{}, body)
	if errors.Is(err, tasks.ErrEnded) {
		return false, sp.Rollback(ctx)
	}
	if err != nil {
		_ = sp.Rollback(ctx)
		return false, err
	}
	return true, sp.Commit(ctx)
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
