package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

// taskRefArgs is how a command that acts on one task names it in its usage.
const taskRefArgs = "(TASK | --type TYPE --key KEY)"

// taskRef is the task a command acts on: the argument TASK, or the flags
// --type and --key, which name the live task of that type with that key.
type taskRef struct {
	fs       *flag.FlagSet
	typ, key *string
	id       tasks.ID // TASK, when given
	failed   bool     // by key: the last failed task (see taskRefFailedFlags)
}

// taskRefFlags adds --type and --key to fs for a command that acts on the
// live task with a key; verb says what the command does to it ("cancel").
func taskRefFlags(fs *flag.FlagSet, verb string) *taskRef {
	return &taskRef{
		fs:  fs,
		typ: fs.String("type", "", "with --key: the `TYPE` of the task"),
		key: fs.String("key", "", verb+" the live task of --type with this `KEY`"),
	}
}

// taskRefFailedFlags is taskRefFlags for a command that acts on a failed
// task (restart): one that has failed no longer holds its key, so by key
// it names the last task of the type with the key that failed.
func taskRefFailedFlags(fs *flag.FlagSet, verb string) *taskRef {
	return &taskRef{
		fs:     fs,
		typ:    fs.String("type", "", "with --key: the `TYPE` of the task"),
		key:    fs.String("key", "", verb+" the last failed task of --type with this `KEY`"),
		failed: true,
	}
}

// byKey says whether the task is named by --type and --key.
func (r *taskRef) byKey() bool { return isSet(r.fs, "key") || isSet(r.fs, "type") }

// parse checks the command line, whose arguments are TASK (unless the task
// is named by key) then rest (as wantArgs takes them), and returns the
// arguments after TASK.
func (r *taskRef) parse(args []string, rest ...string) ([]string, error) {
	if !r.byKey() {
		if len(args) == 0 {
			return nil, usagef("missing TASK argument (or --type and --key)")
		}
		if err := wantArgs(args, append([]string{"TASK"}, rest...)...); err != nil {
			return nil, err
		}
		id, err := parseID("TASK", args[0])
		if err != nil {
			return nil, err
		}
		r.id = id
		return args[1:], nil
	}
	switch {
	case !isSet(r.fs, "key"):
		return nil, usagef("--type goes with --key")
	case !isSet(r.fs, "type") || *r.typ == "":
		return nil, usagef("--key needs --type")
	}
	if err := tasks.ValidateKey(*r.key); err != nil {
		return nil, usagef("--key: %v", err)
	}
	if len(args) > 0 {
		if _, err := tasks.ParseID(args[0]); err == nil {
			return nil, usagef("give TASK or --type and --key, not both")
		}
	}
	if err := wantArgs(args, rest...); err != nil {
		return nil, err
	}
	return args, nil
}

// resolve returns the ID of the task in db: TASK, or that of the task with
// the key, or ErrNotFound naming the type and the key.
func (r *taskRef) resolve(ctx context.Context, db tasks.DB) (tasks.ID, error) {
	if !r.byKey() {
		return r.id, nil
	}
	typ := tasks.Type(*r.typ)
	if !r.failed {
		t, err := tasks.GetByKey(ctx, db, typ, *r.key)
		if err != nil {
			return tasks.ID{}, err
		}
		return t.ID, nil
	}
	last, err := tasks.List(ctx, db, tasks.Filter{Type: typ, Key: *r.key, Status: tasks.StatusFailed, NewestFirst: true, Limit: 1})
	if err != nil {
		return tasks.ID{}, err
	}
	if len(last) == 0 {
		return tasks.ID{}, fmt.Errorf("%w: no failed task of type %q has key %q", tasks.ErrNotFound, typ, *r.key)
	}
	return last[0].ID, nil
}

// resolveRef resolves ref in a read of its own, for a command whose action
// then names the task by its ID (drop-message, which its digest fences).
func (a *app) resolveRef(ctx context.Context, ref *taskRef) (tasks.ID, error) {
	if !ref.byKey() {
		return ref.id, nil
	}
	var id tasks.ID
	err := a.readSnapshot(ctx, func(tx pgx.Tx, _ time.Time) (err error) {
		id, err = ref.resolve(ctx, tx)
		return err
	})
	if err != nil {
		return tasks.ID{}, taskError(err)
	}
	return id, nil
}
