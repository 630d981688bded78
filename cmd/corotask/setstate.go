package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/corotask/corotask/tasks"
)

// maxStateInput bounds the state set-state reads from standard input or a
// file. The database sets no bound of its own on a state below jsonb's; a
// state to edit by hand is far smaller than this.
const maxStateInput = 64 << 20

var setStateCmd = &command{
	name:    "set-state",
	args:    taskRefArgs + " [JSON]",
	summary: "replace the state of a task",
	help: `Replace the state of task TASK with JSON, one JSON value (null: the poller's
zero value), and print the state replaced and the new one. The state is the
JSON argument or, when it is "-" or missing, standard input; --file reads it
from a file. The next poll starts from it; when the task is polled is
unchanged. An ended task is refused, and one an executor holds (try again
once its poll has ended): its poll would commit over the change. The action
is recorded in the task's history with your database role, with both states
(see 'corotask history --json'). With --type and --key instead of TASK, set
the state of the live task of that type with that key.`,
	example: `corotask set-state 01JD7X3M5Q8R9S2T4V6W8Y0Z1A '{"order": 42, "step": "charge"}'
corotask show --json 01JD7X3M5Q8R9S2T4V6W8Y0Z1A | jq '.state | .step = "ship"' | corotask set-state 01JD7X3M5Q8R9S2T4V6W8Y0Z1A -
corotask set-state --file state.json 01JD7X3M5Q8R9S2T4V6W8Y0Z1A
corotask set-state --type orders.checkout --key order-42 '{"order": 42, "step": "ship"}'`,
	flags: func(fs *flag.FlagSet) runFunc {
		file := fs.String("file", "", "read the state from file `F` instead of the argument or standard input")
		ref := taskRefFlags(fs, "set the state of")
		return func(ctx context.Context, a *app, args []string) error {
			rest, err := ref.parse(args, "[JSON]")
			if err != nil {
				return err
			}
			data, err := a.stateInput(rest, *file)
			if err != nil {
				return err
			}
			state, err := parseJSON("state", data)
			if err != nil {
				return err
			}
			var entry tasks.HistoryEntry
			var id tasks.ID
			err = a.withConn(ctx, func(conn *pgx.Conn) error {
				// The action's history entry, read in its transaction, says
				// which state it replaced.
				return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) (err error) {
					if id, err = ref.resolve(ctx, tx); err != nil {
						return err
					}
					if err := tasks.SetState(ctx, tx, id, state); err != nil {
						return err
					}
					h, _, err := tasks.LastHistory(ctx, tx, id, 1)
					if err != nil {
						return err
					}
					if len(h) == 1 {
						entry = h[0]
					}
					return nil
				})
			})
			if err != nil {
				return setStateError(err)
			}
			was := compactJSON(entry.StateBefore)
			if entry.StateBefore == nil {
				was = "null (none: the poller's zero value)"
			}
			fmt.Fprintf(a.stdout, "set state of %s\n  was %s\n  now %s\n", id, was, compactJSON(entry.State))
			if bytes.Equal(entry.StateBefore, entry.State) {
				fmt.Fprintln(a.stdout, "(the same state)")
			}
			return nil
		}
	},
}

// stateInput reads the state set-state is given: the argument, else the
// file (--file), else standard input (no argument, or "-").
func (a *app) stateInput(args []string, file string) ([]byte, error) {
	fromStdin := len(args) == 0 || args[0] == "-"
	if file != "" {
		if len(args) > 0 {
			return nil, usagef("give the state as the JSON argument or with --file, not both")
		}
		f, err := os.Open(file)
		if err != nil {
			return nil, usagef("--file: %v", err)
		}
		defer f.Close()
		return readBounded(f, "state", "--file "+file, maxStateInput)
	}
	if !fromStdin {
		return []byte(args[0]), nil
	}
	if isTerminal(a.stdin) {
		fmt.Fprintln(a.stderr, "corotask set-state: reading the state (one JSON value) from standard input; end it with Ctrl-D")
	}
	return readBounded(a.stdin, "state", "standard input", maxStateInput)
}

// setStateError is taskError, with what to grant when the role may not call
// set_task_state (a grant made before schema 11 does not cover it).
func setStateError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" && strings.Contains(pgErr.Message, "set_task_state") {
		return fmt.Errorf("%w (GRANT EXECUTE ON FUNCTION corotask.set_task_state(uuid, jsonb) TO the role; see docs/operations.md)", err)
	}
	return taskError(err)
}
