package ui

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// Flow control as the pages show it: the Limits page reads every control
// with tasks.Controls; the overview and a task's page read only the
// controls they mark, which costs no count.

// pausedType is a paused type, as the overview marks it.
type pausedType struct {
	At *time.Time
	By string
}

// pausedTypes returns the paused types, by name.
func pausedTypes(ctx context.Context, db tasks.DB) (map[string]pausedType, error) {
	rows, err := db.Query(ctx, query.UIPausedTypes)
	if err != nil {
		return nil, fmt.Errorf("read paused types: %w", err)
	}
	out := make(map[string]pausedType)
	var typ, by string
	var at time.Time // paused_at IS NOT NULL
	_, err = pgx.ForEachRow(rows, []any{&typ, &at, &by}, func() error {
		a := at
		out[typ] = pausedType{At: &a, By: by}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read paused types: %w", err)
	}
	return out, nil
}

// typeFlow is what the page of a task shows of its type's controls.
type typeFlow struct {
	// PausedAt is when the type was paused (nil: it is not), and PausedBy
	// by whom.
	PausedAt *time.Time
	PausedBy string
	// MaxRunning is the type's maximum of running polls (0: none);
	// KeySpace and RateLimit its key space and rate limit ("": none).
	MaxRunning          int
	KeySpace, RateLimit string
}

// Controlled says whether the type has a control.
func (f typeFlow) Controlled() bool {
	return f.PausedAt != nil || f.MaxRunning > 0 || f.KeySpace != "" || f.RateLimit != ""
}

// readTypeFlow reads the controls of type typ (none when it has no row).
func readTypeFlow(ctx context.Context, db tasks.DB, typ tasks.Type) (typeFlow, error) {
	var f typeFlow
	err := db.QueryRow(ctx, query.UITypeControls, string(typ)).Scan(&f.PausedAt, &f.PausedBy, &f.MaxRunning, &f.KeySpace, &f.RateLimit)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return typeFlow{}, fmt.Errorf("read the controls of type %s: %w", typ, err)
	}
	return f, nil
}
