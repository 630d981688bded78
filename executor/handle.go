package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/tasks"
)

// Handle is a task type together with its state type S and message type M.
// Register returns one; NewHandle makes one where no poller is registered
// (a web server that only creates tasks, say). Creating, spawning and sending
// through a Handle takes an S and an M, so a misspelled type name or a
// message of the wrong type does not compile. The untyped functions
// (tasks.Create, inbox.Send, Task.Spawn, Task.Send) remain for the CLI, SQL
// and code that only knows types at run time.
//
// Keep a Handle in a package-level variable next to the poller:
//
//	var Checkout = executor.NewHandle[CheckoutState, CheckoutMsg]("orders.checkout")
//
//	executor.Register(e, Checkout.Type(), checkoutPoller{}) // or use Register's result
//	id, err := Checkout.Create(ctx, pool, CheckoutState{Cart: cart})
type Handle[S, M any] struct {
	typ tasks.Type
}

// NewHandle returns the Handle of typ with state S and messages M. It panics
// when typ is not a valid type name (see tasks.Type.Validate): handles are
// made once, from constants, at start-up.
func NewHandle[S, M any](typ tasks.Type) Handle[S, M] {
	if err := typ.Validate(); err != nil {
		panic(err)
	}
	return Handle[S, M]{typ: typ}
}

// Type returns the handle's task type.
func (h Handle[S, M]) Type() tasks.Type { return h.typ }

// Create creates a root task of this type with the given initial state and
// returns its ID. See tasks.Create for its errors.
func (h Handle[S, M]) Create(ctx context.Context, db tasks.DB, state S) (tasks.ID, error) {
	return tasks.Create(ctx, db, tasks.Spec{Type: h.typ, State: state})
}

// CreateAt is Create, with the task's first poll at wakeAt and a first
// message (nil: none).
func (h Handle[S, M]) CreateAt(ctx context.Context, db tasks.DB, state S, msg *M, wakeAt time.Time) (tasks.ID, error) {
	spec := tasks.Spec{Type: h.typ, State: state, WakeAt: wakeAt}
	if msg != nil {
		spec.Message = *msg
	}
	return tasks.Create(ctx, db, spec)
}

// CreateKeyed is Create with a key for the task (see tasks.Spec.Key): it
// fails with tasks.ErrExists, an *tasks.ExistsError that names the task,
// when a live task of this type has the key (or one that ended within the
// type's key window).
func (h Handle[S, M]) CreateKeyed(ctx context.Context, db tasks.DB, key string, state S) (tasks.ID, error) {
	if key == "" {
		return tasks.ID{}, fmt.Errorf("create task of type %q: %w", h.typ, tasks.ValidateKey(key))
	}
	return tasks.Create(ctx, db, tasks.Spec{Type: h.typ, State: state, Key: key})
}

// SendToKey sends msg from outside any task to the live task of this type
// with key key, creating it with initial state state when there is none,
// and returns its ID; see inbox.SendToKey.
func (h Handle[S, M]) SendToKey(ctx context.Context, db tasks.DB, key string, msg M, state S) (tasks.ID, error) {
	return inbox.SendToKey(ctx, db, h.typ, key, msg, state)
}

// Send sends msg to task to, a task of this type, from outside any task. See
// inbox.Send for its errors. It does not check to's type: that would cost a
// query per message.
func (h Handle[S, M]) Send(ctx context.Context, db tasks.DB, to tasks.ID, msg M) error {
	return inbox.Send(ctx, db, to, tasks.ID{}, msg)
}

// Spawn asks, from a poll, for a child task of this type with the given
// state, created when the poll commits; see Task.Spawn.
func (h Handle[S, M]) Spawn(parent Poll, state S) tasks.ID {
	id := tasks.NewID()
	parent.pollEffects().spawn(id, h.typ, state, nil)
	return id
}

// SpawnWith is Spawn with a first message for the child.
func (h Handle[S, M]) SpawnWith(parent Poll, state S, msg M) tasks.ID {
	id := tasks.NewID()
	parent.pollEffects().spawn(id, h.typ, state, msg)
	return id
}

// SpawnKeyed asks, from a poll, for a child task of this type with key key
// and the given state (and a first message, when msg is not nil), created
// when the poll commits; see Task.SpawnKeyed.
func (h Handle[S, M]) SpawnKeyed(parent Poll, key string, state S, msg *M) tasks.ID {
	id := tasks.NewID()
	var m any
	if msg != nil {
		m = *msg
	}
	parent.pollEffects().spawnWithKey(id, h.typ, key, state, m)
	return id
}

// SendFrom asks, from a poll, for msg to be sent to task to (a task of this
// type) when the poll commits; see Task.Send.
func (h Handle[S, M]) SendFrom(from Poll, to tasks.ID, msg M) {
	from.pollEffects().send(to, msg)
}

// Poll is the task of a poll in progress, whatever its state and message
// types: every *Task[S, M] is one. Handles spawn and send through it.
type Poll interface {
	pollEffects() *effects
}

func (t *Task[S, M]) pollEffects() *effects { return t.eff() }

// TaskOptions are the optional settings of a task a Handle creates or
// spawns with CreateWithOptions or SpawnWithOptions (see tasks.Spec for
// each): its key, its priority and its limit key.
type TaskOptions struct {
	Key      string
	Priority int
	LimitKey string
}

// CreateWithOptions is Create with the task's key, priority and limit key.
func (h Handle[S, M]) CreateWithOptions(ctx context.Context, db tasks.DB, state S, o TaskOptions) (tasks.ID, error) {
	return tasks.Create(ctx, db, tasks.Spec{Type: h.typ, State: state, Key: o.Key, Priority: o.Priority, LimitKey: o.LimitKey})
}

// SpawnWithOptions is Spawn with the child's key, priority and limit key;
// see Task.SpawnSpec.
func (h Handle[S, M]) SpawnWithOptions(parent Poll, state S, o TaskOptions) tasks.ID {
	id := tasks.NewID()
	parent.pollEffects().spawnSpec(tasks.ID{}, tasks.Spec{ID: id, Type: h.typ, State: state,
		Key: o.Key, Priority: o.Priority, LimitKey: o.LimitKey})
	return id
}
