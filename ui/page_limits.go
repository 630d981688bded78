package ui

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

// limitsPage is the Limits page's data: every control of flow control,
// with what each holds back now.
type limitsPage struct {
	tasks.FlowControls
}

func loadLimits(ctx context.Context, h *Handler, r *http.Request, tx pgx.Tx, v *view) error {
	c, err := tasks.Controls(ctx, tx)
	if err != nil {
		return err
	}
	v.Title, v.P = "Limits · corotask", &limitsPage{FlowControls: c}
	return nil
}
