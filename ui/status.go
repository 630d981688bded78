package ui

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// unservedTypes returns the types of ready tasks that no live executor
// serves, once executors have registered; it reads the claim's index.
func unservedTypes(ctx context.Context, db tasks.DB) ([]string, error) {
	rows, err := db.Query(ctx, query.ExecutorsUnserved)
	if err != nil {
		return nil, fmt.Errorf("unserved types: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("unserved types: %w", err)
	}
	return out, nil
}
