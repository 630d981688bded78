package executor

import (
	"time"

	"github.com/corotask/corotask/inbox"
)

// Receive pops the next message of t's inbox, waiting for one for at most d:
// a receive with a timeout, in one call per poll.
//
// deadline is where the wait's deadline is kept, a field of t.State, so
// that it is durable: the first Receive that finds no message sets it to
// the database's time plus d, and every later one waits for the same
// deadline, until a message arrives or the deadline passes. It returns:
//
//   - the next message and ok true when the inbox holds one (even past the
//     deadline: a message that came in time for the poll is not lost). A
//     message ends the wait (the deadline is cleared), but a child's
//     completion (msg.Done) does not: it is returned as the next message,
//     and the next Receive waits for the same deadline still;
//   - ok false and wait, the action for the poll to return
//     (SleepUntil(*deadline): a message wakes the task sooner), while the
//     deadline is ahead; or Yield, when this poll's window of the inbox is
//     used up and more messages wait beyond it (Inbox.More), whatever the
//     deadline;
//   - ok false and the zero Action (wait.IsZero()) once the deadline has
//     passed: the receive timed out, and the deadline is cleared.
//
// What survives what: the deadline is in the state, so it survives every
// poll that commits, whatever woke it (a child's completion, a Yield, an
// operator's retry, a Sleep of the poller's own), and a crash of the
// executor; a failed poll commits no state, so its retry sees the deadline
// as the last committed poll left it. A poll that returns another action
// than wait while the deadline is set (a Yield, say) is woken by that
// action, and its next Receive waits for the same deadline. Only a message
// (or a timeout) ends the wait; a poller that gives up waiting otherwise
// clears *deadline itself.
//
// Time is the database's (corotask.now() at the poll's claim), as for
// SleepUntil: a test clock (corotasktest.WithClock) moves it.
func Receive[S, M any](t *Task[S, M], deadline *time.Time, d time.Duration) (msg inbox.Message[M], ok bool, wait Action) {
	if m, ok := t.Inbox.Pop(); ok {
		if !m.Done {
			*deadline = time.Time{}
		}
		return m, true, Action{}
	}
	if t.Inbox.More() {
		// The window is empty but more messages wait beyond it: the next
		// poll, at once, sees them, before the deadline is judged.
		return inbox.Message[M]{}, false, Yield()
	}
	now := t.Now()
	if deadline.IsZero() {
		*deadline = now.Add(max(d, 0))
	} else if !now.Before(*deadline) {
		*deadline = time.Time{}
		return inbox.Message[M]{}, false, Action{}
	}
	return inbox.Message[M]{}, false, SleepUntil(*deadline)
}
