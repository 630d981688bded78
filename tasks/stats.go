package tasks

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/jackc/pgx/v5"
)

// TypeStats counts the tasks of one type by status.
type TypeStats struct {
	Type   Type
	Counts map[Status]int
	// OldestReady is how long the longest-waiting ready (or unserved) task
	// of the type has been due: the lag an autoscaler reads. Zero when none
	// is ready.
	OldestReady time.Duration
}

// Stats counts the tasks of each type by status, and measures how long the
// oldest ready task of each type has waited, by the database's clock. It
// reads every task: a scan of the table, meant for dashboards polled every
// few seconds, not for every request.
func Stats(ctx context.Context, db DB) ([]TypeStats, error) {
	rows, err := db.Query(ctx, query.Stats)
	if err != nil {
		return nil, fmt.Errorf("task stats: %w", dberr.Translate(err))
	}
	byType := map[Type]*TypeStats{}
	var typ, status string
	var n int
	var age float64
	_, err = pgx.ForEachRow(rows, []any{&typ, &status, &n, &age}, func() error {
		s := byType[Type(typ)]
		if s == nil {
			s = &TypeStats{Type: Type(typ), Counts: map[Status]int{}}
			byType[Type(typ)] = s
		}
		s.Counts[Status(status)] = n
		if d := time.Duration(age * float64(time.Second)); d > s.OldestReady {
			s.OldestReady = d
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("task stats: %w", dberr.Translate(err))
	}
	out := make([]TypeStats, 0, len(byType))
	for _, s := range byType {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out, nil
}
