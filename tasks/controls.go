package tasks

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
)

// Flow control limits the claims of task types, fleet-wide: a type may be
// paused (no executor claims its tasks), its running polls capped
// (SetMaxRunning), its tasks' running count capped per key (SetKeyLimit,
// with Spec.LimitKey), and its poll starts rate limited (SetRateLimit). The
// controls are kept in the database, for every executor alike; each change
// is one call of a SQL function (sql/functions/controls.sql) that records
// it in corotask.control_history with the database role of the session, in
// the same transaction. A role that changes them needs EXECUTE on those
// functions (see docs/flow-control.md). Controls reads them all.

// ControlOption changes how a control is set.
type ControlOption func(*controlOptions)

type controlOptions struct {
	allowNewType bool
}

func controlOpts(opts []ControlOption) controlOptions {
	var o controlOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// AllowNewType accepts a type that no executor has registered (in
// corotask.executors), no task has and that has no controls yet. Without
// it such a type is refused with ErrUnknownType, so that a misspelt type
// does not get a control that holds back nothing; with it, a control may be
// set before the deploy that brings the type.
func AllowNewType() ControlOption {
	return func(o *controlOptions) { o.allowNewType = true }
}

// Pause stops the claims of type typ, fleet-wide, until Resume: its ready
// tasks wait (status paused), its running polls go on to their end. A type
// paused already is refused with ErrPaused, naming since when and by whom;
// an unknown type with ErrUnknownType (see AllowNewType).
func Pause(ctx context.Context, db DB, typ Type, opts ...ControlOption) error {
	if err := typ.Validate(); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	return control(ctx, db, "pause", query.ControlPause, string(typ), controlOpts(opts).allowNewType)
}

// Resume lets executors claim the tasks of type typ again, after Pause. A
// type that is not paused is refused with ErrNotPaused.
func Resume(ctx context.Context, db DB, typ Type) error {
	if err := typ.Validate(); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return control(ctx, db, "resume", query.ControlResume, string(typ))
}

// SetMaxRunning caps the running polls of type typ at max, fleet-wide,
// whatever each executor's concurrency: a claim takes no task of typ while
// max of them run. A poll whose claim expired (its executor died) stops
// counting. A max below the polls running now stops none of them: claims
// wait until they have ended below it. max below 1 is refused (Pause runs
// none); an unknown type with ErrUnknownType (see AllowNewType).
func SetMaxRunning(ctx context.Context, db DB, typ Type, max int, opts ...ControlOption) error {
	if err := typ.Validate(); err != nil {
		return fmt.Errorf("set max running: %w", err)
	}
	if max < 1 {
		return fmt.Errorf("set max running of %s: %d is below 1 (Pause runs none; ClearMaxRunning removes the maximum)", typ, max)
	}
	return control(ctx, db, "set max running of "+string(typ), query.ControlSetMaxRunning, string(typ), max,
		controlOpts(opts).allowNewType)
}

// ClearMaxRunning removes the maximum of running polls of type typ; a type
// without one is left as it is.
func ClearMaxRunning(ctx context.Context, db DB, typ Type) error {
	if err := typ.Validate(); err != nil {
		return fmt.Errorf("clear max running: %w", err)
	}
	return control(ctx, db, "clear max running of "+string(typ), query.ControlClearMaxRunning, string(typ))
}

// SetKeyLimit caps the running tasks per key in key space space at max: of
// the tasks of types whose Spec.LimitKey is the same, at most max run at
// once, fleet-wide. types become the space's types: each counts in it
// (leaving the space it counted in, if any), and a type that counted in it
// and is not among them leaves it. Tasks without a LimitKey are not
// concerned. max below 1, an empty space or no types are refused; an
// unknown type with ErrUnknownType (see AllowNewType).
func SetKeyLimit(ctx context.Context, db DB, space string, max int, types []Type, opts ...ControlOption) error {
	if err := validName("key space", space); err != nil {
		return fmt.Errorf("set key limit: %w", err)
	}
	what := fmt.Sprintf("set key limit of %q", space)
	if max < 1 {
		return fmt.Errorf("%s: max %d is below 1", what, max)
	}
	if len(types) == 0 {
		return fmt.Errorf("%s: no types (name the types whose tasks count in it)", what)
	}
	names, err := typeNames(types)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return control(ctx, db, what, query.ControlSetKeyLimit, pgx.NamedArgs{
		"space": space, "max": max, "types": names, "allow_new": controlOpts(opts).allowNewType})
}

// ClearKeyLimit removes key space space: its types' tasks run without a
// limit per key. A space that does not exist is refused with ErrNoKeyLimit.
func ClearKeyLimit(ctx context.Context, db DB, space string) error {
	if err := validName("key space", space); err != nil {
		return fmt.Errorf("clear key limit: %w", err)
	}
	return control(ctx, db, fmt.Sprintf("clear key limit of %q", space), query.ControlClearKeyLimit, space)
}

// SetRateLimit sets the rate limit name: at most rate takes per per,
// fleet-wide, as a token bucket of rate tokens that refills continuously
// (a burst takes at most rate at once). Each poll start of a task of types
// (a claim, a takeover) takes one token; with none left, the claims of
// those types wait. types become the limit's types (a type that took from
// it and is not among them no longer does); an empty, non-nil list makes a
// limit that only Acquire takes from; nil keeps the types it has (a new
// limit: none), so that changing a rate does not detach them. A new limit starts full; setting one again keeps the
// tokens it holds, up to its new rate. rate below 1, per below a
// millisecond or an empty name are refused; an unknown type with
// ErrUnknownType (see AllowNewType).
func SetRateLimit(ctx context.Context, db DB, name string, rate int, per time.Duration, types []Type, opts ...ControlOption) error {
	if err := validName("rate limit", name); err != nil {
		return fmt.Errorf("set rate limit: %w", err)
	}
	what := fmt.Sprintf("set rate limit %q", name)
	if rate < 1 {
		return fmt.Errorf("%s: rate %d is below 1", what, rate)
	}
	if per < time.Millisecond {
		return fmt.Errorf("%s: period %v is below a millisecond", what, per)
	}
	names, err := typeNames(types)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if types == nil {
		names = nil // keep the limit's types
	}
	return control(ctx, db, what, query.ControlSetRateLimit, pgx.NamedArgs{
		"name": name, "rate": rate, "per_us": per.Microseconds(), "types": names,
		"allow_new": controlOpts(opts).allowNewType})
}

// ClearRateLimit removes the rate limit name: its types' claims take no
// tokens. A limit that does not exist is refused with ErrNoRateLimit.
func ClearRateLimit(ctx context.Context, db DB, name string) error {
	if err := validName("rate limit", name); err != nil {
		return fmt.Errorf("clear rate limit: %w", err)
	}
	return control(ctx, db, fmt.Sprintf("clear rate limit %q", name), query.ControlClearRateLimit, name)
}

// Acquire takes n tokens of the rate limit name, for code that calls a
// rate-limited service itself (in a poll, say): when the bucket holds n, it
// takes them and returns 0; else it takes none and returns how long until
// it would hold n if nobody took any meanwhile (a poll may then sleep that
// long, and try again). The bucket refills by corotask's clock
// (corotask.now()); a take locks the limit's row only when the bucket
// holds n (a refusal locks nothing), waiting for a concurrent take, and
// checks the bucket again under the lock, so that concurrent takes never
// take more than it holds. A limit that does not exist is refused
// with ErrNoRateLimit; n below 1, or above the limit's rate (the bucket
// never holds more), is refused too. Its role needs UPDATE on
// corotask.rate_limits, which executors' roles have.
func Acquire(ctx context.Context, db DB, name string, n int) (wait time.Duration, err error) {
	if err := validName("rate limit", name); err != nil {
		return 0, fmt.Errorf("acquire: %w", err)
	}
	if n < 1 {
		return 0, fmt.Errorf("acquire %d tokens of rate limit %q: at least 1", n, name)
	}
	var us int64
	if err := db.QueryRow(ctx, query.ControlAcquire, name, n).Scan(&us); err != nil {
		return 0, fmt.Errorf("acquire %d tokens of rate limit %q: %w", n, name, dberr.TranslateInvalid(err))
	}
	return time.Duration(us) * time.Microsecond, nil
}

// control runs sql, a change of the controls with args, and names the
// change (what) in its error.
func control(ctx context.Context, db DB, what, sql string, args ...any) error {
	if _, err := db.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("%s: %w", what, dberr.TranslateInvalid(err))
	}
	return nil
}

// validName checks the name of a key space or a rate limit (what).
func validName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty %s", what)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s %q: not UTF-8", what, name)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%s %q: leading or trailing space", what, name)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%s %q: contains NUL", what, name)
	}
	return nil
}

// typeNames validates types and returns them as strings.
func typeNames(types []Type) ([]string, error) {
	names := make([]string, len(types))
	for i, t := range types {
		if err := t.Validate(); err != nil {
			return nil, err
		}
		names[i] = string(t)
	}
	return names, nil
}
