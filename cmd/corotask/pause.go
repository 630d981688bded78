package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/corotask/corotask/tasks"
)

var pauseCmd = &command{
	name:    "pause",
	args:    "TYPE",
	summary: "stop the claims of a task type, fleet-wide",
	help: `Pause task type TYPE: no executor claims its tasks until 'corotask resume';
its ready tasks wait (status paused), the polls running go on to their end,
and tasks may still be created and sent messages. A type paused already is
refused, naming since when and by whom. A type that no executor has
registered and no task has is refused as a likely typo, unless
--allow-new-type (to pause a type before the deploy that brings it). The
change is recorded in corotask.control_history with your database role (see
docs/flow-control.md).`,
	example: `corotask pause orders.checkout
corotask pause --allow-new-type reports.monthly`,
	flags: func(fs *flag.FlagSet) runFunc {
		allowNew := allowNewTypeFlag(fs)
		return func(ctx context.Context, a *app, args []string) error {
			typ, err := typeArg(args)
			if err != nil {
				return err
			}
			err = a.withConn(ctx, func(conn *pgx.Conn) error {
				return tasks.Pause(ctx, conn, typ, controlOptions(*allowNew)...)
			})
			if err != nil {
				return controlError(err)
			}
			fmt.Fprintf(a.stdout, "paused %s: executors claim none of its tasks until 'corotask resume %s'\n", oneLine(string(typ)), oneLine(string(typ)))
			return nil
		}
	},
}

var resumeCmd = &command{
	name:    "resume",
	args:    "TYPE",
	summary: "let executors claim a paused task type again",
	help: `Resume task type TYPE, which 'corotask pause' paused: executors claim its
tasks again. A type that is not paused is refused. The change is recorded in
corotask.control_history with your database role, with when the type was
paused and by whom.`,
	example: `corotask resume orders.checkout`,
	flags: func(fs *flag.FlagSet) runFunc {
		return func(ctx context.Context, a *app, args []string) error {
			typ, err := typeArg(args)
			if err != nil {
				return err
			}
			err = a.withConn(ctx, func(conn *pgx.Conn) error {
				return tasks.Resume(ctx, conn, typ)
			})
			if err != nil {
				return controlError(err)
			}
			fmt.Fprintf(a.stdout, "resumed %s\n", oneLine(string(typ)))
			return nil
		}
	},
}

// typeArg returns the one argument TYPE, validated.
func typeArg(args []string) (tasks.Type, error) {
	if err := wantArgs(args, "TYPE"); err != nil {
		return "", err
	}
	typ := tasks.Type(args[0])
	if err := typ.Validate(); err != nil {
		return "", usagef("%v", err)
	}
	return typ, nil
}

// allowNewTypeFlag adds --allow-new-type to fs.
func allowNewTypeFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("allow-new-type", false, "accept a type that no executor has registered and no task has")
}

// controlOptions are the options of a control for --allow-new-type.
func controlOptions(allowNew bool) []tasks.ControlOption {
	if allowNew {
		return []tasks.ControlOption{tasks.AllowNewType()}
	}
	return nil
}

// controlError is the error of a change of a control: with the hint of
// --allow-new-type for an unknown type, and where to find the grants when
// the role may not make the change.
// The part of err that names the refusal is kept, without the operation
// around it, which the command's name says already.
func controlError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return fmt.Errorf("%w (your role needs EXECUTE on the function: see docs/flow-control.md)", err)
	}
	sentinels := []error{tasks.ErrUnknownType, tasks.ErrPaused, tasks.ErrNotPaused, tasks.ErrNoRateLimit, tasks.ErrNoKeyLimit}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if m, ok := e.(interface{ Unwrap() []error }); ok {
			for _, s := range sentinels {
				if slices.Contains(m.Unwrap(), s) {
					if s == tasks.ErrUnknownType {
						return fmt.Errorf("%w; --allow-new-type accepts it", e)
					}
					return e
				}
			}
		}
	}
	return taskError(err)
}
