package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
)

// FlowControls is every control of flow control (see Pause), with what it
// holds back now, as Controls reads it (a function of that name takes the
// name Controls): what corotask limit, corotask stats and
// the web UI show.
type FlowControls struct {
	// Types are the types that have a control, by name.
	Types []TypeControls
	// KeySpaces are the key spaces (SetKeyLimit), by name.
	KeySpaces []KeySpace
	// RateLimits are the rate limits (SetRateLimit), by name.
	RateLimits []RateLimit
}

// Type returns the controls of type typ, and whether it has any.
func (c FlowControls) Type(typ Type) (TypeControls, bool) {
	for _, t := range c.Types {
		if t.Type == typ {
			return t, true
		}
	}
	return TypeControls{}, false
}

// TypeControls are the controls of one type.
type TypeControls struct {
	Type Type
	// PausedAt is when the type was paused (nil: it is not), and PausedBy
	// the database role that paused it.
	PausedAt *time.Time
	PausedBy string
	// MaxRunning is its maximum of running polls (SetMaxRunning); 0: none.
	MaxRunning int
	// Running is how many of its polls run now and count toward
	// MaxRunning (claims that have not expired).
	Running int
	// Ready is how many of its tasks are ready (due, and held by no
	// executor), and Waiting how many of those the controls hold back: all
	// of them while the type is paused, at its maximum or its rate limit
	// has no whole token; else those whose key is at its space's limit.
	Ready, Waiting int
	// KeySpace is the key space its tasks count in, RateLimit the rate limit
	// its poll starts take from; empty: none.
	KeySpace, RateLimit string
}

// Paused says whether the type is paused.
func (t TypeControls) Paused() bool { return t.PausedAt != nil }

// KeySpace is a key space: at most MaxRunning tasks of its types with the
// same limit key run at once.
type KeySpace struct {
	Name       string
	MaxRunning int
	Types      []Type
	// KeysAtLimit is how many keys have MaxRunning tasks running (or
	// more, after the limit was lowered); Keys are at most MaxKeysShown of
	// them, those with the most tasks waiting first.
	KeysAtLimit int
	Keys        []KeyLoad
}

// MaxKeysShown is how many of a key space's keys at their limit Controls
// returns.
const MaxKeysShown = 20

// KeyLoad is a key at its space's limit: its running tasks, and its ready
// tasks, which wait.
type KeyLoad struct {
	Key              string
	Running, Waiting int
}

// RateLimit is a rate limit: at most Rate takes per Per.
type RateLimit struct {
	Name string
	Rate int
	Per  time.Duration
	// Tokens is what its bucket holds now (a claim takes a whole one).
	Tokens float64
	// Types are the types whose poll starts take from it.
	Types []Type
}

// Controls reads every control, and counts what each holds back now, by
// corotask's clock, in one transaction. Its counts read the claim's indexes
// for the controlled types only.
func Controls(ctx context.Context, db DB) (FlowControls, error) {
	var c FlowControls
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		if c.Types, err = readTypeControls(ctx, tx); err != nil {
			return err
		}
		if c.KeySpaces, err = readKeySpaces(ctx, tx); err != nil {
			return err
		}
		c.RateLimits, err = readRateLimits(ctx, tx)
		return err
	})
	if err != nil {
		return FlowControls{}, fmt.Errorf("read controls: %w", dberr.Translate(err))
	}
	return c, nil
}

func readTypeControls(ctx context.Context, tx pgx.Tx) ([]TypeControls, error) {
	rows, err := tx.Query(ctx, query.ControlsTypes)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TypeControls, error) {
		var t TypeControls
		var typ string
		err := r.Scan(&typ, &t.PausedAt, &t.PausedBy, &t.MaxRunning, &t.KeySpace, &t.RateLimit,
			&t.Running, &t.Ready, &t.Waiting)
		t.Type = Type(typ)
		return t, err
	})
}

func readKeySpaces(ctx context.Context, tx pgx.Tx) ([]KeySpace, error) {
	rows, err := tx.Query(ctx, query.ControlsKeySpaces)
	if err != nil {
		return nil, err
	}
	spaces, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (KeySpace, error) {
		var s KeySpace
		var types []string
		err := r.Scan(&s.Name, &s.MaxRunning, &types)
		s.Types = asTypes(types)
		return s, err
	})
	if err != nil {
		return nil, err
	}
	for i := range spaces {
		rows, err := tx.Query(ctx, query.ControlsKeysAtLimit, spaces[i].Name, MaxKeysShown)
		if err != nil {
			return nil, err
		}
		var k KeyLoad
		var all int
		_, err = pgx.ForEachRow(rows, []any{&k.Key, &k.Running, &k.Waiting, &all}, func() error {
			spaces[i].Keys = append(spaces[i].Keys, k)
			spaces[i].KeysAtLimit = all
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return spaces, nil
}

func readRateLimits(ctx context.Context, tx pgx.Tx) ([]RateLimit, error) {
	rows, err := tx.Query(ctx, query.ControlsRateLimits)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (RateLimit, error) {
		var l RateLimit
		var us int64
		var types []string
		err := r.Scan(&l.Name, &l.Rate, &us, &l.Tokens, &types)
		l.Per = time.Duration(us) * time.Microsecond
		l.Types = asTypes(types)
		return l, err
	})
}

func asTypes(names []string) []Type {
	out := make([]Type, len(names))
	for i, n := range names {
		out[i] = Type(n)
	}
	return out
}
