// Package treeread reads a task's tree for the CLI and the web UI: the walk
// down from the task (query.TreeWalk), then the rows of the tasks it found
// (query.Tree), in two statements, so that each runs on Citus (see
// query.TreeWalk).
package treeread

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// Query returns the rows of query.Tree for task top and its descendants,
// breadth first and at most limit of them; no row when top does not
// exist.
func Query(ctx context.Context, db tasks.DB, top tasks.ID, limit int) (pgx.Rows, error) {
	var root tasks.ID
	switch err := db.QueryRow(ctx, query.TreeRoot, top).Scan(&root); {
	case errors.Is(err, pgx.ErrNoRows):
		// query.Tree of no task: no row, and the columns callers read.
	case err != nil:
		return nil, fmt.Errorf("read tree: %w", err)
	}
	var ids []tasks.ID
	var depths []int32
	if !root.IsZero() {
		rows, err := db.Query(ctx, query.TreeWalk, query.TreeWalkExecMode, top.UUID(), limit, root.UUID())
		if err != nil {
			return nil, fmt.Errorf("read tree: %w", err)
		}
		var id tasks.ID
		var depth int32
		if _, err := pgx.ForEachRow(rows, []any{&id, &depth}, func() error {
			ids, depths = append(ids, id), append(depths, depth)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("read tree: %w", err)
		}
	}
	rows, err := db.Query(ctx, query.Tree, ids, depths, root)
	if err != nil {
		return nil, fmt.Errorf("read tree: %w", err)
	}
	return rows, nil
}
