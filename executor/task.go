package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/jsonenc"
	"github.com/corotask/corotask/tasks"
)

// Poller polls tasks of one type. S is the task's durable state, M the type
// its messages decode into.
//
// A poll may run more than once for the same state and messages (after a
// crash, a lost claim or a failure), so what it does outside the commit must
// be idempotent. What it asks for through Task (State, popped messages,
// Spawn, Send, OnCommit) is committed together, exactly once, or not at all.
type Poller[S, M any] interface {
	Poll(ctx context.Context, t *Task[S, M]) (Action, error)
}

// PollerFunc adapts a function to a Poller.
type PollerFunc[S, M any] func(ctx context.Context, t *Task[S, M]) (Action, error)

// Poll calls f.
func (f PollerFunc[S, M]) Poll(ctx context.Context, t *Task[S, M]) (Action, error) { return f(ctx, t) }

// Task is what a poll sees of its task, and how it asks for effects.
type Task[S, M any] struct {
	ID     tasks.ID
	Type   tasks.Type
	Parent tasks.ID
	// State is decoded from the stored state (its zero value for a new task)
	// and saved when the poll commits.
	State S
	// Inbox holds the pending messages; what the poll does not Pop stays for
	// the next poll.
	Inbox *inbox.Inbox[M]
	// Failures is how many polls of this task failed in a row before this one.
	Failures int
	// Woke says why the task was due: a message, a child's completion, its
	// timer, a retry, ... (see WakeReasons).
	Woke WakeReasons

	// now is the database's time at the claim (see Receive); zero: not known.
	now time.Time

	// effects is allocated by the first effect asked for: most polls ask
	// for none, and each poll in flight holds its Task.
	effects *effects
}

// Now is the database's time when the task was claimed (corotask.now(),
// the clock SleepUntil and readiness go by; a test's Clock with
// corotasktest), or the local time when it is not known (TryPoll without
// TryInput.Now).
func (t *Task[S, M]) Now() time.Time {
	if t.now.IsZero() {
		return time.Now()
	}
	return t.now
}

// eff returns the poll's effects, allocating them on first use.
func (t *Task[S, M]) eff() *effects {
	if t.effects == nil {
		t.effects = new(effects)
	}
	return t.effects
}

type effects struct {
	spawns   []tasks.Spec
	sends    []send
	onCommit []func(ctx context.Context, tx pgx.Tx) error
	err      error // the first effect that could not be encoded
}

type send struct {
	to   tasks.ID
	body []byte
}

// Spawn asks for a child task of type typ, with initial state and first
// message msg (either may be nil), created when the poll commits. It returns
// the child's ID at once. When the child ends, this task receives one
// completion message from it.
func (t *Task[S, M]) Spawn(typ tasks.Type, state, msg any) tasks.ID {
	id := tasks.NewID()
	t.eff().spawn(id, typ, state, msg)
	return id
}

// SpawnKeyed is Spawn with a key for the child (see tasks.Spec.Key): no two
// live tasks of type typ have the same key. A key that a live task of the
// type holds, or another child of the same commit, fails the commit, and so
// the poll, with tasks.ErrExists naming the task that holds it; an invalid
// key (see tasks.ValidateKey) fails the poll too.
func (t *Task[S, M]) SpawnKeyed(typ tasks.Type, key string, state, msg any) tasks.ID {
	id := tasks.NewID()
	t.eff().spawnWithKey(id, typ, key, state, msg)
	return id
}

// SpawnSpec is Spawn with the whole of a spec: its ID (a new one when
// zero), Key, Priority and LimitKey (see tasks.Spec). The child's parent is
// this task and it is ready at once: a spec with another Parent, or a
// WakeAt, fails the poll.
func (t *Task[S, M]) SpawnSpec(spec tasks.Spec) tasks.ID {
	if spec.ID.IsZero() {
		spec.ID = tasks.NewID()
	}
	t.eff().spawnSpec(t.ID, spec)
	return spec.ID
}

// Send asks for msg to be sent to task to, from this task, when the poll
// commits. Messages are sent in the order of the calls. Sending to a task that
// does not exist or has ended fails the commit, and so the poll.
func (t *Task[S, M]) Send(to tasks.ID, msg any) {
	t.eff().send(to, msg)
}

// OnCommit runs fn inside the poll's commit transaction, after the task's own
// update: what fn writes is committed exactly once, together with the poll. An
// error from fn fails the poll.
func (t *Task[S, M]) OnCommit(fn func(ctx context.Context, tx pgx.Tx) error) {
	e := t.eff()
	e.onCommit = append(e.onCommit, fn)
}

func (e *effects) spawn(id tasks.ID, typ tasks.Type, state, msg any) {
	e.spawnKeyed(id, typ, "", state, msg)
}

// spawnWithKey asks for a child with key key, which must not be empty: a
// spawn without a key is Spawn.
func (e *effects) spawnWithKey(id tasks.ID, typ tasks.Type, key string, state, msg any) {
	if key == "" {
		e.fail(fmt.Errorf("spawn %s: %w", typ, tasks.ValidateKey(key)))
		return
	}
	e.spawnKeyed(id, typ, key, state, msg)
}

// spawnSpec asks for the child spec of the task parent (see SpawnSpec;
// zero: a Handle's spawn, whose spec names no parent).
func (e *effects) spawnSpec(parent tasks.ID, spec tasks.Spec) {
	switch {
	case !spec.Parent.IsZero() && !parent.IsZero() && spec.Parent != parent:
		e.fail(fmt.Errorf("spawn %s: parent %s: a poll spawns children of its own task (%s) only", spec.Type, spec.Parent, parent))
		return
	case !spec.WakeAt.IsZero():
		e.fail(fmt.Errorf("spawn %s: WakeAt: a spawned child is ready at once (sleep in its first poll instead)", spec.Type))
		return
	}
	if err := tasks.ValidatePriority(spec.Priority); err != nil {
		e.fail(fmt.Errorf("spawn %s: %w", spec.Type, err))
		return
	}
	if spec.LimitKey != "" {
		if err := tasks.ValidateKey(spec.LimitKey); err != nil {
			e.fail(fmt.Errorf("spawn %s: limit key: %w", spec.Type, err))
			return
		}
	}
	n := len(e.spawns)
	e.spawnKeyed(spec.ID, spec.Type, spec.Key, spec.State, spec.Message)
	if len(e.spawns) > n {
		e.spawns[n].Priority, e.spawns[n].LimitKey = spec.Priority, spec.LimitKey
	}
}

// spawnKeyed asks for a child with key key ("": none).
func (e *effects) spawnKeyed(id tasks.ID, typ tasks.Type, key string, state, msg any) {
	if err := typ.Validate(); err != nil {
		e.fail(fmt.Errorf("spawn: %w", err))
		return
	}
	st, err := jsonenc.Encode(state)
	if err != nil {
		e.fail(fmt.Errorf("spawn %s: state: %w", typ, err))
		return
	}
	m, err := jsonenc.Encode(msg)
	if err != nil {
		e.fail(fmt.Errorf("spawn %s: message: %w", typ, err))
		return
	}
	if key != "" {
		if err := tasks.ValidateKey(key); err != nil {
			e.fail(fmt.Errorf("spawn %s: %w", typ, err))
			return
		}
	}
	e.spawns = append(e.spawns, tasks.Spec{ID: id, Type: typ, State: st, Message: m, Key: key})
}

func (e *effects) send(to tasks.ID, msg any) {
	if to.IsZero() {
		e.fail(fmt.Errorf("send: no recipient (zero task id)"))
		return
	}
	b, err := jsonenc.Encode(msg)
	if err != nil {
		e.fail(fmt.Errorf("send to %s: %w", to, err))
		return
	}
	if b == nil {
		b = []byte("null")
	}
	e.sends = append(e.sends, send{to: to, body: b})
}

func (e *effects) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}
