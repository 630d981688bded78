package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

var createCmd = &command{
	name:    "create",
	summary: "create a task and print its ID",
	help: `Create a task and print its ID. It is polled at once, or at --at, or after
--in, by an executor that has a poller for its type. With --message, the new
task's inbox starts with that message (from its parent, if any). With --key,
the task has that key, which no other live task of its type may have (see
'corotask send --key'). --priority orders its claim (higher first, 0 the
default and the lowest) and --limit-key is its key in its type's key space
(see 'corotask limit' and docs/flow-control.md).`,
	example: `corotask create --type orders.checkout --state '{"order": 42}'
corotask create --type orders.checkout --key order-42
corotask create --type reminder --parent 01JD7X3M5Q8R9S2T4V6W8Y0Z1A --in 2h
corotask create --type reports.build --priority 5 --limit-key tenant-42`,
	flags: func(fs *flag.FlagSet) runFunc {
		typ := fs.String("type", "", "the task's `TYPE`, e.g. orders.checkout (required)")
		parent := fs.String("parent", "", "the parent `TASK`, which must be alive")
		state := fs.String("state", "", "the initial state, a `JSON` value (default: the poller's zero value)")
		message := fs.String("message", "", "a first inbox message, a `JSON` value")
		at := fs.String("at", "", "first poll at `TIME` (RFC 3339, e.g. 2025-01-02T15:04:05Z; default: now)")
		in := fs.String("in", "", "first poll after `DURATION` (e.g. 90s, 2h; default: now)")
		id := fs.String("id", "", "the new task's `ID` (default: a new ULID)")
		key := fs.String("key", "", "the task's `KEY`, unique among the live tasks of its type (default: none)")
		priority := fs.Int("priority", 0, "the task's `PRIORITY`, 0 (the lowest) to 32767: claims take higher first")
		limitKey := fs.String("limit-key", "", "the task's `KEY` in its type's key space (default: none)")
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args); err != nil {
				return err
			}
			// Everything is checked before connecting: a bad input changes nothing.
			if *typ == "" {
				return usagef("missing required flag --type")
			}
			spec := tasks.Spec{Type: tasks.Type(*typ)}
			if err := spec.Type.Validate(); err != nil {
				return usagef("--type: %v", err)
			}
			if isSet(fs, "key") {
				if err := tasks.ValidateKey(*key); err != nil {
					return usagef("--key: %v", err)
				}
				spec.Key = *key
			}
			if err := tasks.ValidatePriority(*priority); err != nil {
				return usagef("--priority: %v", err)
			}
			spec.Priority = *priority
			if isSet(fs, "limit-key") {
				if err := tasks.ValidateKey(*limitKey); err != nil {
					return usagef("--limit-key: %v", err)
				}
				spec.LimitKey = *limitKey
			}
			var err error
			if spec.ID, err = parseOptionalID("--id", *id); err != nil {
				return err
			}
			if spec.Parent, err = parseOptionalID("--parent", *parent); err != nil {
				return err
			}
			if *state != "" {
				if spec.State, err = parseJSON("--state", []byte(*state)); err != nil {
					return err
				}
			}
			if *message != "" {
				if spec.Message, err = parseJSON("--message", []byte(*message)); err != nil {
					return err
				}
			}
			var wait time.Duration
			switch {
			case *at != "" && *in != "":
				return usagef("--at and --in exclude each other: give one")
			case *at != "":
				if spec.WakeAt, err = parseTime("--at", *at); err != nil {
					return err
				}
			case *in != "":
				if wait, err = parseDuration("--in", *in); err != nil {
					return err
				}
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				if *in != "" {
					// From the database's clock, which decides when the task is due.
					var now time.Time
					if err := conn.QueryRow(ctx, query.Now).Scan(&now); err != nil {
						return err
					}
					spec.WakeAt = now.Add(wait)
				}
				newID, err := tasks.Create(ctx, conn, spec)
				if err != nil {
					return taskError(err)
				}
				fmt.Fprintln(a.stdout, newID)
				return nil
			})
		}
	},
}

// isSet says whether flag name was given on the command line (an empty
// value included).
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
