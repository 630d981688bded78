package executor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/internal/jsonenc"
	"github.com/corotask/corotask/tasks"
)

// Option configures how an executor runs one task type.
type Option func(*typeOptions)

type typeOptions struct {
	maxFailures int
	concurrency int
	// backoffMin and backoffMax override Config.BackoffMin/Max when set.
	backoffMin, backoffMax time.Duration
	noHistory              bool
	snapshots              bool
	// inboxWindow is how many messages a poll is shown at most; 0 means
	// DefaultInboxWindow.
	inboxWindow int
	// pollTimeout bounds how long a poll of the type may run; 0: unbounded.
	pollTimeout time.Duration
}

// DefaultInboxWindow is how many messages of its inbox a poll is shown when
// its type sets no InboxWindow.
const DefaultInboxWindow = 100

// MaxInboxWindow is the largest InboxWindow: a window's messages travel in
// the claim's reply and are decoded before the poll starts.
const MaxInboxWindow = 100_000

// window is how many messages a poll of the type is shown at most.
func (o typeOptions) window() int { return cmp.Or(o.inboxWindow, DefaultInboxWindow) }

// history is how the type's polls are recorded in corotask.history: 0 not
// at all, 1 a row per poll, 2 a row with the state.
func (o typeOptions) history() int16 {
	switch {
	case o.noHistory:
		return 0
	case o.snapshots:
		return 2
	}
	return 1
}

// Backoff bounds the delay before a failed task of the type is polled
// again, overriding Config.BackoffMin and BackoffMax: minDelay doubled for
// each consecutive failure, capped at maxDelay, with jitter. Neither may be
// negative, and minDelay must not exceed maxDelay.
func Backoff(minDelay, maxDelay time.Duration) Option {
	return func(o *typeOptions) { o.backoffMin, o.backoffMax = minDelay, maxDelay }
}

// History turns the recording of the type's polls in corotask.history on
// (the default) or off. Turn it off for high-volume types whose tasks end at
// their first poll, where a row per poll costs more than it tells. Operator
// actions, takeovers of expired claims and released claims are recorded
// either way.
func History(on bool) Option { return func(o *typeOptions) { o.noHistory = !on } }

// SnapshotState keeps the task's state, as each poll left it, in the poll's
// history row (off by default): the inputs to replay a poller against in a
// test, at the cost of a copy of the state per recorded poll.
func SnapshotState(on bool) Option { return func(o *typeOptions) { o.snapshots = on } }

// MaxFailures ends a task as failed (and tells its parent) after n
// consecutive failed polls. The default, 0, retries for ever with backoff.
func MaxFailures(n int) Option { return func(o *typeOptions) { o.maxFailures = n } }

// InboxWindow bounds how many messages of its inbox a poll of the type is
// shown: the oldest n (default DefaultInboxWindow, at most MaxInboxWindow).
// When more wait, Task.Inbox.More reports it; a poll that pops every
// message it was shown is then polled again at once, whatever it returned
// (see Yield), and so on until the backlog is read. A task with a large
// backlog thus costs a bounded claim and poll each time, and its messages
// are read in order, a window at a time.
func InboxWindow(n int) Option { return func(o *typeOptions) { o.inboxWindow = n } }

// PollTimeout bounds how long a poll of the type may run: d after it
// starts, its context is canceled with a cause that wraps ErrPollTimeout
// (context.Cause(ctx) says so, naming d and the type), and the poll fails,
// counted as any failed poll (backoff, then MaxFailures), with last_error
// "poll timed out after d ...". Whatever the poll returns once d has passed
// is discarded, a success included: a poller that ignores its context
// commits nothing late. Go cannot stop a goroutine, so such a poller still
// holds its slot and its claim (renewed) until it returns; the failure is
// recorded then. The default, 0, sets no bound; d must not be negative.
//
// The executor's own causes win over a timeout, before or after it, until
// the poll settles: a poll stopped by a shutdown (ErrShutdown) has its claim
// released, no failure counted; one whose claim was lost (ErrClaimLost,
// ErrRenewTimeout) or whose task was canceled (ErrCanceled) writes nothing.
func PollTimeout(d time.Duration) Option { return func(o *typeOptions) { o.pollTimeout = d } }

// MaxConcurrency caps how many tasks of the type this executor polls at once.
// The default, 0, is only bounded by Config.Concurrency.
func MaxConcurrency(n int) Option { return func(o *typeOptions) { o.concurrency = n } }

// ErrDuplicateType is returned by RegisterSafely for a type that already has a poller.
var ErrDuplicateType = errors.New("task type already registered")

// Register registers p as the poller of tasks of type typ. It panics when typ
// is invalid or already registered, or when the executor is running; see
// RegisterSafely. It returns the type's Handle, for creating, spawning and
// sending to tasks of the type with S and M checked at compile time.
func Register[S, M any](e *Executor, typ tasks.Type, p Poller[S, M], opts ...Option) Handle[S, M] {
	h, err := RegisterSafely(e, typ, p, opts...)
	if err != nil {
		panic(err)
	}
	return h
}

// RegisterSafely is Register, returning an error instead of panicking.
func RegisterSafely[S, M any](e *Executor, typ tasks.Type, p Poller[S, M], opts ...Option) (Handle[S, M], error) {
	if err := typ.Validate(); err != nil {
		return Handle[S, M]{}, fmt.Errorf("register: %w", err)
	}
	if p == nil {
		return Handle[S, M]{}, fmt.Errorf("register %s: nil poller", typ)
	}
	var o typeOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxFailures < 0 || o.concurrency < 0 {
		return Handle[S, M]{}, fmt.Errorf("register %s: MaxFailures and MaxConcurrency must not be negative", typ)
	}
	if o.inboxWindow < 0 || o.inboxWindow > MaxInboxWindow {
		return Handle[S, M]{}, fmt.Errorf("register %s: InboxWindow(%d): must be between 1 and %d (0: the default, %d)",
			typ, o.inboxWindow, MaxInboxWindow, DefaultInboxWindow)
	}
	if o.backoffMin < 0 || o.backoffMax < 0 || o.backoffMin > o.backoffMax {
		return Handle[S, M]{}, fmt.Errorf("register %s: Backoff(%s, %s): min and max must not be negative, and min must not exceed max", typ, o.backoffMin, o.backoffMax)
	}
	if o.pollTimeout < 0 {
		return Handle[S, M]{}, fmt.Errorf("register %s: PollTimeout(%s): must not be negative (0: no timeout)", typ, o.pollTimeout)
	}
	h := &typed[S, M]{p: p, opts: o}
	if fn, ok := p.(PollerFunc[S, M]); ok {
		h.fn = fn
	}
	if err := e.register(typ, h); err != nil {
		return Handle[S, M]{}, err
	}
	return Handle[S, M]{typ: typ}, nil
}

// handler runs polls of one registered type, hiding S and M from the executor.
type handler interface {
	poll(ctx context.Context, c *claimed) *outcome
	options() typeOptions
}

// claimed is a task as the claim returns it.
type claimed struct {
	id       tasks.ID
	typ      tasks.Type
	parent   tasks.ID
	root     tasks.ID // the root of its tree (its parent's); zero when not known
	state    []byte
	inbox    [][]byte // the window of its inbox the claim read, oldest first ...
	seqs     []int64  // ... each message's seq ...
	more     bool     // ... and whether more messages wait after them
	claim    [16]byte
	failures int
	attempt  int // the task's attempt number this claim holds
	// claimedAt is the local time just before the claim was sent: the
	// heartbeat keeper counts the claim's age from it.
	claimedAt time.Time
	hooked    *pollRecord // what Config.Hooks learn of the poll; nil without hooks
	takenOver bool        // claimed from another executor whose claim expired
	trace     []byte      // the trace context the task was created in (JSON), or nil
	key       string      // the task's key (tasks.Spec.Key), or ""
	woke      WakeReasons // why the task was due
	// now is the database's time (corotask.now()) at the claim; zero when
	// not known (Receive then reads the local clock).
	now time.Time
	// lane is whether the priority lane claimed it (see priorityLane).
	lane bool
}

// outcome is what a poll produced, ready to commit.
type outcome struct {
	err   error // the poll failed: nothing below is committed
	state []byte
	taken int
	// popFrom and popTo are the seqs of the first and last message popped
	// (when taken > 0).
	popFrom, popTo int64
	action         Action
	result         []byte
	effects
	// trace is the poll's trace context (tasks.TraceFrom of its context),
	// kept with the children it spawns and the messages it sends.
	trace map[string]string
}

// PanicError is the error of a poll that panicked: while its state or
// messages were decoded, in the poller, while its state or result were
// encoded, or in an OnCommit function. Its text, stored as the task's
// last_error, holds the panic's value and the stack of the goroutine that
// panicked.
type PanicError struct {
	// Where says what panicked: "poller" (decoding, polling and encoding
	// included) or "OnCommit".
	Where string
	Value any
	Stack []byte
}

func (p *PanicError) Error() string {
	return fmt.Sprintf("%s panicked: %v\n\n%s", p.Where, p.Value, p.Stack)
}

// recovered turns a recovered panic value into a *PanicError.
func recovered(where string, v any) *PanicError {
	return &PanicError{Where: where, Value: v, Stack: debug.Stack()}
}

type typed[S, M any] struct {
	p Poller[S, M]
	// fn is p when p is a PollerFunc, called directly: one frame less
	// under the poller's (see polls.run).
	fn   PollerFunc[S, M]
	opts typeOptions
}

func (h *typed[S, M]) options() typeOptions { return h.opts }

// poll decodes the task, polls it and encodes what it asked for. All three
// run user code (UnmarshalJSON, Poll, MarshalJSON), so all three are inside
// one recover: a panic is a failed poll, never the end of the process.
// Decoding and encoding are in functions of their own, so that only this
// small frame sits under the poller's while it runs (see polls.run).
func (h *typed[S, M]) poll(ctx context.Context, c *claimed) (out *outcome) {
	defer recoverPoll(&out)
	t, out := h.decode(c)
	if out != nil {
		return out
	}
	var act Action
	var err error
	if h.fn != nil {
		act, err = h.fn(ctx, t)
	} else {
		act, err = h.p.Poll(ctx, t)
	}
	return h.encode(t, &act, err, c)
}

// recoverPoll turns a panic in a poll into its failed outcome.
func recoverPoll(out **outcome) {
	if v := recover(); v != nil {
		*out = &outcome{err: recovered("poller", v)}
	}
}

// decode builds the poller's view of the claimed task: its state and inbox
// decoded into S and M. A state that does not decode fails the poll (out).
//
//go:noinline
func (h *typed[S, M]) decode(c *claimed) (t *Task[S, M], out *outcome) {
	t = &Task[S, M]{ID: c.id, Type: c.typ, Parent: c.parent, Failures: c.failures, Woke: c.woke, now: c.now}
	if len(c.state) > 0 && string(c.state) != "null" {
		if err := json.Unmarshal(c.state, &t.State); err != nil {
			return nil, &outcome{err: fmt.Errorf("task %s: state does not decode into %T: %w", c.id, t.State, err)}
		}
	}
	msgs := envelope.Decode[M](c.id, c.inbox)
	if c.more {
		t.Inbox = inbox.Partial(msgs...)
	} else {
		t.Inbox = inbox.Of(msgs...)
	}
	return t, nil
}

// encode turns what the poller returned into the outcome to commit. What
// the poll popped of the window c holds leaves the stored inbox when it
// commits.
//
//go:noinline
func (h *typed[S, M]) encode(t *Task[S, M], act *Action, err error, c *claimed) *outcome {
	if err != nil {
		return &outcome{err: err}
	}
	eff := t.effects
	if eff == nil {
		eff = &effects{}
	}
	out := finish(t.ID, act, t.State, len(c.inbox)-t.Inbox.Len(), eff)
	if out.err == nil {
		out.readOn(c)
	}
	return out
}

// readOn makes a poll that popped every message of its window, while more
// wait after it, a Yield: the task is polled again at once, with the next
// window, whatever the poll returned. A Done would otherwise end the task
// with messages it was never shown; a Suspend would sleep with messages
// waiting. A poll that left messages of its window unpopped chose to: its
// action stands. It also notes which messages the poll popped.
func (out *outcome) readOn(c *claimed) {
	if out.taken > 0 {
		out.popFrom, out.popTo = c.seqs[0], c.seqs[out.taken-1]
	}
	if c.more && out.taken == len(c.inbox) && out.action.kind != actYield {
		out.action, out.result = Yield(), nil
	}
}

// finish validates and encodes what a successful poll asked for.
func finish(id tasks.ID, act *Action, state any, taken int, eff *effects) *outcome {
	if eff.err != nil {
		return &outcome{err: eff.err}
	}
	if act.kind == 0 {
		return &outcome{err: fmt.Errorf("task %s: poller returned no action: return Yield, Sleep, SleepUntil, Suspend, Done or DoneWith", id)}
	}
	if act.kind == actDone && len(eff.spawns) > 0 {
		return &outcome{err: fmt.Errorf("task %s: a poll that ends its task cannot spawn children", id)}
	}
	st, err := json.Marshal(state)
	if err != nil {
		return &outcome{err: fmt.Errorf("task %s: encode state: %w", id, err)}
	}
	out := &outcome{state: st, taken: taken, action: *act, effects: *eff}
	if act.kind == actDone && act.result != nil {
		if out.result, err = jsonenc.Encode(act.result); err != nil {
			return &outcome{err: fmt.Errorf("task %s: encode result: %w", id, err)}
		}
	}
	return out
}
