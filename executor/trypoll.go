package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/tasks"
)

// TryInput is the task a poll is tried on: what a claim would hand the
// poller.
type TryInput[S, M any] struct {
	// ID is the task's ID; zero: a new ID for each try.
	ID tasks.ID
	// Type is the task's type, as the poll sees it in Task.Type.
	Type tasks.Type
	// Parent is the task's parent; zero for a root task.
	Parent tasks.ID
	// State is the task's state before the poll.
	State S
	// Messages are the task's inbox, oldest first. A message whose Raw is
	// set carries Raw as its body instead of Body: one that does not decode
	// into M reaches the poll as a poison message (Message.DecodeErr set),
	// as it would from the database.
	Messages []inbox.Message[M]
	// More says that more messages wait after Messages (a full inbox
	// window, so Messages must not be empty): Task.Inbox.More reports it,
	// and a poll that pops them all is committed as a Yield (see
	// InboxWindow).
	More bool
	// Failures is how many polls of the task failed in a row before this
	// one (Task.Failures).
	Failures int
	// Woke is why the task was due (Task.Woke).
	Woke WakeReasons
	// Now is the database's time at the poll's claim, which Receive reads;
	// zero: the local clock's.
	Now time.Time
}

// TryResult is what a poll asked to commit.
type TryResult[S any] struct {
	// Action is the action the commit would follow: what the poll returned,
	// or Yield when it popped a whole window while more messages wait (see
	// InboxWindow). Actions compare equal when they ask for the same thing:
	// require.Equal(t, executor.Sleep(time.Minute), res.Action).
	Action Action
	// State is the new state as the next poll would see it: StateJSON
	// decoded into S.
	State S
	// StateJSON is the new state as it would be stored.
	StateJSON json.RawMessage
	// Result is the result of DoneWith as it would be stored, and sent to
	// the parent; nil for any other action.
	Result json.RawMessage
	// Popped is how many messages the poll popped: they would leave the
	// inbox.
	Popped int
	// Spawns are the children the poll spawned, in the order spawned.
	Spawns []TrySpawn
	// Sends are the messages the poll sent, in the order sent.
	Sends []TrySend
	// OnCommit holds the functions the poll registered with Task.OnCommit,
	// in order; RunOnCommit runs them.
	OnCommit []func(ctx context.Context, tx pgx.Tx) error
}

// TrySpawn is a child a poll spawned.
type TrySpawn struct {
	ID      tasks.ID
	Type    tasks.Type
	Key     string          // "": none (see Task.SpawnKeyed)
	State   json.RawMessage // nil: the poller's zero value
	Message json.RawMessage // the child's first message; nil: none
}

// TrySend is a message a poll sent.
type TrySend struct {
	To      tasks.ID
	Message json.RawMessage
}

// TryPoll runs one poll of p on the task in, as an executor would (the
// state and messages are encoded to JSON and decoded again, the poller is
// called, what it asked for is checked and encoded), and returns what the
// poll would commit, without a database and without committing anything.
// It is for unit tests of pollers; PollOnce runs polls for real.
//
// An error is the poll's failure, the error the executor would record: the
// poller's error, a *PanicError when decoding, polling or encoding panicked,
// or an invalid action or effect. Nothing of a failed poll would be
// committed, and the TryResult is then zero. TryPoll also fails when in's
// state or messages do not encode, or when the new state does not decode
// into S (the next poll would fail on it).
func TryPoll[S, M any](ctx context.Context, p Poller[S, M], in TryInput[S, M]) (TryResult[S], error) {
	if p == nil {
		return TryResult[S]{}, errors.New("executor: TryPoll: nil poller")
	}
	c, err := in.claimed()
	if err != nil {
		return TryResult[S]{}, fmt.Errorf("executor: TryPoll: %w", err)
	}
	h := &typed[S, M]{p: p}
	if fn, ok := p.(PollerFunc[S, M]); ok {
		h.fn = fn
	}
	out := h.poll(ctx, c)
	if out.err != nil {
		return TryResult[S]{}, out.err
	}
	res := TryResult[S]{
		Action:    out.action,
		StateJSON: out.state,
		Result:    out.result,
		Popped:    out.taken,
		OnCommit:  out.onCommit,
	}
	if err := json.Unmarshal(out.state, &res.State); err != nil {
		return TryResult[S]{}, fmt.Errorf("executor: TryPoll: the new state %s does not decode into %T: %w", out.state, res.State, err)
	}
	for _, s := range out.spawns {
		res.Spawns = append(res.Spawns, TrySpawn{ID: s.ID, Type: s.Type, Key: s.Key, State: rawJSON(s.State), Message: rawJSON(s.Message)})
	}
	for _, s := range out.sends {
		res.Sends = append(res.Sends, TrySend{To: s.to, Message: s.body})
	}
	return res, nil
}

// RunOnCommit runs the poll's OnCommit functions in tx, in order, as the
// commit would: the first error stops them, and a panic is returned as a
// *PanicError.
func (r TryResult[S]) RunOnCommit(ctx context.Context, tx pgx.Tx) error {
	for i, fn := range r.OnCommit {
		if err := tryOnCommit(ctx, tx, fn); err != nil {
			return fmt.Errorf("OnCommit function %d: %w", i+1, err)
		}
	}
	return nil
}

func tryOnCommit(ctx context.Context, tx pgx.Tx, fn func(context.Context, pgx.Tx) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = recovered("OnCommit", v)
		}
	}()
	return fn(ctx, tx)
}

// claimed encodes the task as a claim reads it from the database.
func (in TryInput[S, M]) claimed() (*claimed, error) {
	if in.More && len(in.Messages) == 0 {
		return nil, errors.New("More without Messages: a window holds one message at least")
	}
	id := in.ID
	if id.IsZero() {
		id = tasks.NewID()
	}
	state, err := json.Marshal(in.State)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	c := &claimed{id: id, typ: in.Type, parent: in.Parent, state: state, more: in.More, failures: in.Failures,
		woke: in.Woke, now: in.Now}
	for i, m := range in.Messages {
		b, err := storedMessage(m)
		if err != nil {
			return nil, fmt.Errorf("encode message %d: %w", i, err)
		}
		c.inbox = append(c.inbox, b)
		c.seqs = append(c.seqs, int64(i+1))
	}
	return c, nil
}

// storedMessage encodes m as an inbox column holds it.
func storedMessage[M any](m inbox.Message[M]) ([]byte, error) {
	env := envelope.Envelope{From: m.From, Body: m.Raw, Done: m.Done, Err: m.Err}
	if env.Body == nil {
		b, err := json.Marshal(m.Body)
		if err != nil {
			return nil, err
		}
		env.Body = b
	}
	if !m.SentAt.IsZero() {
		env.At = &m.SentAt
	}
	return json.Marshal(env)
}

// rawJSON returns the JSON a tasks.Spec field holds once encoded.
func rawJSON(v any) json.RawMessage {
	b, _ := v.([]byte)
	return b
}
