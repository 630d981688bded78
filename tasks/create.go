package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/jsonenc"
	"github.com/corotask/corotask/internal/query"
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
	// Key, when not empty, names the task among the live tasks of its
	// type: no two of them have the same key (a second is refused with an
	// *ExistsError naming the first), and GetByKey and inbox.SendToKey find
	// it by it. Once the task has ended, the key is free again, but for a
	// type with a key window (SetKeyWindow), which keeps it reserved for a
	// while. See ValidateKey for what a key may hold.
	Key string
	// Priority orders claims: of the ready tasks an executor may claim, it
	// takes those of the highest priority first, then the oldest. 0, the
	// default, is the lowest; MaxPriority the highest. A child a poll
	// spawns that its executor claims at once (see
	// executor.Config.DisableEagerChildren) is polled ahead of any order.
	Priority int
	// LimitKey, when not empty, is the task's key in the key space of its
	// type (see SetKeyLimit): at most the space's limit of tasks with the
	// same LimitKey run at once, across the types of the space; the others
	// wait, in claim order, with status "limited". A type without a key
	// space runs its tasks regardless. It follows the rules of ValidateKey.
	LimitKey string
}

// MaxPriority is the highest priority a task may have (see Spec.Priority).
const MaxPriority = 32767

// ValidatePriority returns an error naming p unless it is a priority a task
// may have: 0 to MaxPriority.
func ValidatePriority(p int) error {
	if p < 0 || p > MaxPriority {
		return fmt.Errorf("invalid priority %d: priorities run from 0 (the default, the lowest) to %d", p, MaxPriority)
	}
	return nil
}

// Create creates one task and returns its ID. It fails with ErrExists (an
// *ExistsError that names the task) when the ID is taken, or a live task of
// the type has the spec's Key (or one that ended within the type's key
// window), and with ErrNotFound or ErrEnded when the
// parent does not exist or has ended.
func Create(ctx context.Context, db DB, spec Spec) (ID, error) {
	ids, err := CreateMany(ctx, db, []Spec{spec})
	if err != nil {
		return ID{}, err
	}
	return ids[0], nil
}

// CreateMany creates many tasks in one statement, and so in one round trip:
// all of them, or none when any fails. A spec may name as parent a task
// created earlier in the same call, never one that comes later in it nor its
// own task (ErrParentCycle: a task would be its own ancestor). The IDs are
// returned in the order of specs.
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
		keys     []*string // nil: no spec has a key
		prios    []int16   // nil: every spec has priority 0 ...
		limits   []*string // ... and no limit key
		err      error
	)
	withParent := false
	for i, s := range specs {
		if err := s.Type.Validate(); err != nil {
			return nil, fmt.Errorf("create task %d: %w", i, err)
		}
		ids[i] = s.ID
		if ids[i].IsZero() {
			ids[i] = NewID()
		}
		types[i], parents[i] = string(s.Type), s.Parent
		withParent = withParent || !s.Parent.IsZero()
		if states[i], err = jsonenc.Encode(s.State); err != nil {
			return nil, fmt.Errorf("create task %s: state: %w", ids[i], err)
		}
		if messages[i], err = jsonenc.Encode(s.Message); err != nil {
			return nil, fmt.Errorf("create task %s: message: %w", ids[i], err)
		}
		if !s.WakeAt.IsZero() {
			wakeAts[i] = &specs[i].WakeAt
		}
		if s.Key != "" {
			if err := ValidateKey(s.Key); err != nil {
				return nil, fmt.Errorf("create task %s: %w", ids[i], err)
			}
			if keys == nil {
				keys = make([]*string, len(specs))
			}
			keys[i] = &specs[i].Key
		}
		if s.Priority != 0 || s.LimitKey != "" {
			if err := ValidatePriority(s.Priority); err != nil {
				return nil, fmt.Errorf("create task %s: %w", ids[i], err)
			}
			if s.LimitKey != "" {
				if err := ValidateKey(s.LimitKey); err != nil {
					return nil, fmt.Errorf("create task %s: limit key: %w", ids[i], err)
				}
			}
			if prios == nil {
				prios, limits = make([]int16, len(specs)), make([]*string, len(specs))
			}
			prios[i] = int16(s.Priority)
			if s.LimitKey != "" {
				limits[i] = &specs[i].LimitKey
			}
		}
	}
	if withParent {
		if err := refuseParentCycles(ids, parents); err != nil {
			return nil, err
		}
	}
	args := pgx.NamedArgs{"ids": ids, "types": types, "parents": parents, "states": states,
		"messages": messages, "wake_ats": wakeAts}
	var traces [][]byte
	if carrier := TraceFrom(ctx); carrier != nil {
		trace, err := json.Marshal(carrier)
		if err != nil {
			return nil, fmt.Errorf("create tasks: trace context: %w", err)
		}
		traces = make([][]byte, len(specs))
		for i := range traces {
			traces[i] = trace
		}
	}
	switch {
	case prios != nil:
		// Only a call with priorities or limit keys needs the form that
		// takes them.
		args["traces"], args["keys"], args["priorities"], args["limit_keys"] = traces, keys, prios, limits
		_, err = db.Exec(ctx, query.TasksCreateControlled, args)
	case keys != nil:
		// Only a call with keys needs the form that takes them.
		args["traces"], args["keys"] = traces, keys
		_, err = db.Exec(ctx, query.TasksCreateKeyed, args)
	case traces != nil:
		args["traces"] = traces
		_, err = db.Exec(ctx, query.TasksCreateTraced, args)
	default:
		_, err = db.Exec(ctx, query.TasksCreate, args)
	}
	if err != nil {
		if len(specs) == 1 {
			return nil, fmt.Errorf("create task %s: %w", ids[0], translate(err))
		}
		return nil, fmt.Errorf("create %d tasks: %w", len(specs), translate(err))
	}
	return ids, nil
}

// refuseParentCycles returns an error wrapping ErrParentCycle when a task of
// ids would be its own ancestor (parents[i] is the parent of ids[i]): its own
// parent, or the child of a task that comes later in ids. Parents not in ids
// exist already (create_tasks checks it), and no existing task has a new one
// as parent, so no longer cycle can form. create_tasks refuses the same.
func refuseParentCycles(ids, parents []ID) error {
	at := make(map[ID]int, len(ids))
	for i, id := range ids {
		at[id] = i
	}
	for i, p := range parents {
		j, ok := at[p]
		switch {
		case p.IsZero() || !ok || j < i:
			continue
		case j == i:
			return fmt.Errorf("create task %s: %w: task %s cannot be its own parent", ids[i], ErrParentCycle, ids[i])
		case parents[j] == ids[i]:
			return fmt.Errorf("create task %s: %w: tasks %s and %s would be each other's parents: "+
				"a parent must exist before its child, or come earlier in the same CreateMany", ids[i], ErrParentCycle, ids[i], ids[j])
		default:
			return fmt.Errorf("create task %s: %w: its parent %s comes later in the same CreateMany (spec %d, after spec %d): "+
				"a parent must exist before its child, or come earlier in the same CreateMany", ids[i], ErrParentCycle, p, j, i)
		}
	}
	return nil
}
