package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/jsonenc"
)

// Spec describes a task to create.
type Spec struct {
	// ID of the new task; a new ID is generated when zero.
	ID ID
	// Type selects the poller; required.
	Type Type
	// Parent, when not zero, must be a live task: it receives one completion
	// message when this task ends.
	Parent ID
	// State is the initial state, encoded as JSON (nil: the poller's zero value).
	State any
	// Message, when not nil, is the task's first inbox message, from Parent
	// (or from outside any task for a root).
	Message any
	// WakeAt is when the task is first polled; zero means now.
	WakeAt time.Time
}

// Create creates one task and returns its ID. It fails with ErrExists when the
// ID is taken, and with ErrNotFound or ErrEnded when the parent does not exist
// or has ended.
func Create(ctx context.Context, db DB, spec Spec) (ID, error) {
	ids, err := CreateMany(ctx, db, []Spec{spec})
	if err != nil {
		return ID{}, err
	}
	return ids[0], nil
}

// CreateMany creates many tasks in one statement, and so in one round trip:
// all of them, or none when any fails. A spec may name as parent a task
// created earlier in the same call. The IDs are returned in the order of specs.
//
// The trace context of ctx (see WithTrace), if any, is stored with each task.
func CreateMany(ctx context.Context, db DB, specs []Spec) ([]ID, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	var (
		ids      = make([]ID, len(specs))
		types    = make([]string, len(specs))
		parents  = make([]ID, len(specs))
		states   = make([][]byte, len(specs))
		messages = make([][]byte, len(specs))
		wakeAts  = make([]*time.Time, len(specs))
		err      error
	)
	for i, s := range specs {
		if err := s.Type.Validate(); err != nil {
			return nil, fmt.Errorf("create task %d: %w", i, err)
		}
		ids[i] = s.ID
		if ids[i].IsZero() {
			ids[i] = NewID()
		}
		types[i], parents[i] = string(s.Type), s.Parent
		if states[i], err = jsonenc.Encode(s.State); err != nil {
			return nil, fmt.Errorf("create task %s: state: %w", ids[i], err)
		}
		if messages[i], err = jsonenc.Encode(s.Message); err != nil {
			return nil, fmt.Errorf("create task %s: message: %w", ids[i], err)
		}
		if !s.WakeAt.IsZero() {
			wakeAts[i] = &specs[i].WakeAt
		}
	}
	if carrier := TraceFrom(ctx); carrier == nil {
		_, err = db.Exec(ctx, `SELECT corotask.create_tasks($1::uuid[], $2::text[], $3::uuid[], $4::jsonb[], $5::jsonb[], $6::timestamptz[])`,
			ids, types, parents, states, messages, wakeAts)
	} else {
		var trace []byte
		if trace, err = json.Marshal(carrier); err != nil {
			return nil, fmt.Errorf("create tasks: trace context: %w", err)
		}
		traces := make([][]byte, len(specs))
		for i := range traces {
			traces[i] = trace
		}
		_, err = db.Exec(ctx, `SELECT corotask.create_tasks($1::uuid[], $2::text[], $3::uuid[], $4::jsonb[], $5::jsonb[], $6::timestamptz[], $7::jsonb[])`,
			ids, types, parents, states, messages, wakeAts, traces)
	}
	if err != nil {
		if len(specs) == 1 {
			return nil, fmt.Errorf("create task %s: %w", ids[0], dberr.Translate(err))
		}
		return nil, fmt.Errorf("create %d tasks: %w", len(specs), dberr.Translate(err))
	}
	return ids, nil
}
