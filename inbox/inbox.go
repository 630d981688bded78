package inbox

import (
	"fmt"

	"github.com/corotask/corotask/tasks"
)

// Inbox is a poll's view of a task's pending messages, oldest first. Messages
// the poll Pops are gone once the poll commits; the others stay, in order, for
// the next poll (followed by whatever arrived during this one). A poll is
// shown a window of its task's inbox, the oldest messages (see
// executor.InboxWindow): More reports whether others wait after them. An
// Inbox is not safe for concurrent use.
type Inbox[M any] struct {
	msgs  []Message[M]
	taken int
	more  bool
}

// DecodeError says which message of which task could not be decoded. It is
// the DecodeErr of that Message: the message is delivered, not dropped.
type DecodeError struct {
	Task     tasks.ID
	Position int // 0 is the oldest message
	Err      error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("task %s: inbox message %d does not decode: %v", e.Task, e.Position, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Of returns an Inbox holding msgs, oldest first: the executor hands each
// poll one, and tests of pollers make their own.
func Of[M any](msgs ...Message[M]) *Inbox[M] {
	return &Inbox[M]{msgs: msgs}
}

// Partial returns an Inbox holding msgs, the oldest messages of a larger
// inbox: More reports true. Tests of pollers use it to see how a poller
// handles a backlog.
func Partial[M any](msgs ...Message[M]) *Inbox[M] {
	return &Inbox[M]{msgs: msgs, more: true}
}

// More reports whether the task's inbox holds more messages than this
// window: they come in the next polls, in order. Once the poll has popped
// every message of its window, the task is polled again at once whatever
// the poll returns (even Done: a task does not end with messages it was
// never shown).
func (in *Inbox[M]) More() bool { return in.more }

// Len returns how many messages are left to Pop.
func (in *Inbox[M]) Len() int { return len(in.msgs) - in.taken }

// Peek returns the oldest message left without taking it; false when none is left.
func (in *Inbox[M]) Peek() (Message[M], bool) {
	if in.Len() == 0 {
		var zero Message[M]
		return zero, false
	}
	return in.msgs[in.taken], true
}

// Pop takes the oldest message left; false when none is left. A popped
// message is removed from the task's inbox when the poll commits.
func (in *Inbox[M]) Pop() (Message[M], bool) {
	m, ok := in.Peek()
	if ok {
		in.taken++
	}
	return m, ok
}
