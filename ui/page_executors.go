package ui

import (
	"context"
	"net/http"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

// executorsPage is the executors page's data.
type executorsPage struct {
	Live, Gone []tasks.Executor
	// Unserved are the types of ready tasks that no live executor serves.
	Unserved []string
	// Paused are the paused types, by name.
	Paused map[string]pausedType
}

func loadExecutors(ctx context.Context, h *Handler, r *http.Request, tx pgx.Tx, v *view) error {
	execs, err := tasks.Executors(ctx, tx)
	if err != nil {
		return err
	}
	p := &executorsPage{}
	for _, e := range execs {
		if e.Stale || e.StoppedAt != nil {
			p.Gone = append(p.Gone, e)
		} else {
			p.Live = append(p.Live, e)
		}
	}
	slices.Reverse(p.Gone) // the latest first
	if p.Unserved, err = unservedTypes(ctx, tx); err != nil {
		return err
	}
	if p.Paused, err = pausedTypes(ctx, tx); err != nil {
		return err
	}
	v.Title, v.P = "Executors · corotask", p
	return nil
}
