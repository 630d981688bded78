package executor

import (
	"fmt"
	"time"
)

type actionKind uint8

const (
	actYield actionKind = iota + 1
	actSleep
	actUntil
	actSuspend
	actAwait
	actDone
)

// Action is what a poll asks for next. Make one with Yield, Sleep,
// SleepUntil, Suspend, AwaitChildren, Done or DoneWith; the zero Action is
// invalid and fails the poll.
type Action struct {
	kind   actionKind
	sleep  time.Duration
	at     time.Time
	result any
}

// Yield polls the task again as soon as an executor is free.
func Yield() Action { return Action{kind: actYield} }

// Sleep polls the task again after d, or sooner if a message arrives.
func Sleep(d time.Duration) Action { return Action{kind: actSleep, sleep: max(d, 0)} }

// SleepUntil polls the task again at t, or sooner if a message arrives.
func SleepUntil(t time.Time) Action { return Action{kind: actUntil, at: t} }

// Suspend polls the task again only when a message arrives.
//
// Messages the poll left in its inbox (not popped) do not count: a task
// that suspends with unread messages sleeps until another message arrives,
// and that poll sees the old messages first, then the new one. A poll that
// wants to see its unread messages again soon returns Yield or Sleep
// instead. Messages that arrived while the poll ran do count: the task is
// polled again at once.
func Suspend() Action { return Action{kind: actSuspend} }

// AwaitChildren polls the task again when all its children have ended, or
// sooner when one of them ends without a result (it failed for good, past
// its type's MaxFailures, or was canceled: its completion has Err set), or
// when a message that is not a completion arrives. It is the fan-in of a
// workflow: a task that spawns N children and awaits them is polled once
// more, with their N completion messages in its inbox, instead of once per
// completion (or batch of completions) as with Suspend, and still hears of a
// failure at once.
//
// The children counted are the task's children that have not ended when
// the poll commits, those it spawned in this poll included. A task with none
// is polled again at once, as with Yield. Each completion still arrives in
// the inbox as it would after Suspend; only the wake-ups differ.
func AwaitChildren() Action { return Action{kind: actAwait} }

// Done ends the task; its parent receives a completion message with a null body.
//
// If messages arrived for the task while the poll ran, the poll is
// superseded, as Temporal refuses to complete a workflow with unhandled
// signals: nothing of it is kept (state, popped messages, children,
// messages sent, OnCommit work, result), and the task is polled again at
// once from its previous state, with those messages after the ones it had.
// So no message accepted for a task is left unseen by a poll, and a poll
// that returns Done still has its effects committed exactly once, or not at
// all.
func Done() Action { return Action{kind: actDone} }

// DoneWith ends the task with a result, stored (as JSON) in the task and sent
// as the body of the parent's completion message.
func DoneWith(result any) Action { return Action{kind: actDone, result: result} }

func (a Action) sqlName() string {
	switch a.kind {
	case actYield:
		return "yield"
	case actSleep:
		return "sleep"
	case actUntil:
		return "until"
	case actSuspend:
		return "suspend"
	case actAwait:
		return "await"
	case actDone:
		return "done"
	}
	return ""
}

func (a Action) String() string {
	switch a.kind {
	case actSleep:
		return fmt.Sprintf("sleep(%s)", a.sleep)
	case actUntil:
		return fmt.Sprintf("sleep until %s", a.at.Format(time.RFC3339Nano))
	case 0:
		return "invalid action"
	}
	return a.sqlName()
}

// IsZero reports whether a is the zero Action, which is no action (a poll
// that returns it fails): Receive returns it when its wait timed out.
func (a Action) IsZero() bool { return a.kind == 0 }
