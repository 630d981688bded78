package executor

import "strings"

// WakeReasons says why a task was due when its poll was claimed: each
// reason is a bit, several may be set (a message that arrives after a
// Sleep's time came: Message and Timer), and the zero value says nothing is
// known (a task created before schema 12, or claimed by an older build).
//
// The reasons are those gathered since the task's last committed poll: a
// commit replaces them with what its action arms (Timer for Sleep and
// SleepUntil, Yield for Yield), and what arrives after it adds to them. A
// failed poll commits nothing, so the next poll sees its reasons still,
// with Retry and Timer (the backoff's). A message that makes a sleeping
// task due before its time takes Timer away: Timer means the time came.
//
// The reasons are stored in the task's row, written by the statements that
// write it anyway (create, deliver, commit, fail, operator actions), and
// returned by the claim: knowing them costs no statement.
type WakeReasons uint16

// The reasons, as stored in corotask.tasks.woke.
const (
	// WokeFirst: no poll of the task has committed yet (its first poll, or
	// a retry of it).
	WokeFirst WakeReasons = 1 << iota
	// WokeMessage: a message that is not a child's completion arrived.
	WokeMessage
	// WokeChild: a child's completion arrived.
	WokeChild
	// WokeTimer: the time a Sleep, SleepUntil or a failure's backoff asked
	// for came.
	WokeTimer
	// WokeRetry: the last poll failed (or its executor stopped renewing its
	// claim), and this one retries it.
	WokeRetry
	// WokeOperator: an operator retried, restarted or set the state of the
	// task, or sent it a message (corotask send, the web UI).
	WokeOperator
	// WokeYield: the last poll returned Yield (or popped its whole inbox
	// window while more messages waited, or awaited children when none was
	// left).
	WokeYield
)

// wakeNames are the reasons' names, in the order of their bits.
var wakeNames = [...]string{"first", "message", "child", "timer", "retry", "operator", "yield"}

// First reports WokeFirst: no poll of the task has committed yet.
func (w WakeReasons) First() bool { return w&WokeFirst != 0 }

// Message reports WokeMessage: a message arrived.
func (w WakeReasons) Message() bool { return w&WokeMessage != 0 }

// Child reports WokeChild: a child's completion arrived.
func (w WakeReasons) Child() bool { return w&WokeChild != 0 }

// Timer reports WokeTimer: the time a Sleep, SleepUntil or backoff asked for
// came.
func (w WakeReasons) Timer() bool { return w&WokeTimer != 0 }

// Retry reports WokeRetry: the last poll failed.
func (w WakeReasons) Retry() bool { return w&WokeRetry != 0 }

// Operator reports WokeOperator: an operator acted on the task.
func (w WakeReasons) Operator() bool { return w&WokeOperator != 0 }

// Yield reports WokeYield: the last poll yielded.
func (w WakeReasons) Yield() bool { return w&WokeYield != 0 }

// String lists the reasons, joined by "+" ("message+timer"); "none" for
// the zero value.
func (w WakeReasons) String() string {
	if w == 0 {
		return "none"
	}
	var b strings.Builder
	for i, name := range wakeNames {
		if w&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('+')
		}
		b.WriteString(name)
	}
	if rest := w &^ (1<<len(wakeNames) - 1); rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('+')
		}
		b.WriteString("unknown")
	}
	return b.String()
}
