package tasks

import "fmt"

// Status is where a task is in its life. It is derived from the stored
// columns, not stored itself.
type Status string

const (
	// StatusReady: wake_at has passed and no executor holds the task; the next claim may take it.
	StatusReady Status = "ready"
	// StatusUnserved: ready, but no live executor serves its type (see
	// Executors): those that did stopped or died, or none serves it; nothing
	// will poll it until one that does starts. Only reported once executors
	// have registered in the database: where none has (tasks polled only
	// through PollOnce), ready tasks are StatusReady.
	StatusUnserved Status = "unserved"
	// StatusPaused: ready, but its type is paused (see Pause): no executor
	// claims it until the type is resumed. A pause comes before
	// StatusUnserved: it is why nothing claims the task.
	StatusPaused Status = "paused"
	// StatusLimited: ready and served, but held back by its type's flow
	// control: the type runs its fleet-wide maximum (SetMaxRunning), the
	// task's limit key runs its key space's maximum (SetKeyLimit), or the
	// type's rate limit has no whole token left (SetRateLimit). A claim
	// takes it once a slot or a token frees.
	StatusLimited Status = "limited"
	// StatusSleeping: wake_at is in the future, as the task's last poll asked.
	StatusSleeping Status = "sleeping"
	// StatusRetrying: the task's last poll failed (Failures > 0) and it waits out
	// the backoff until WakeAt.
	StatusRetrying Status = "retrying"
	// StatusSuspended: no wake_at; the task waits for a message.
	StatusSuspended Status = "suspended"
	// StatusRunning: an executor holds a claim on the task (its claim is set; not
	// running is exactly "claim IS NULL", and then Heartbeat is zero).
	StatusRunning Status = "running"
	// StatusStale: an executor holds a claim on the task, but the claim has
	// expired: that executor died or stalled, and another will take the
	// task over.
	StatusStale Status = "stale"
	// StatusDone: the poller returned Done or DoneWith.
	StatusDone Status = "done"
	// StatusFailed: the task failed more times in a row than its type allows.
	StatusFailed Status = "failed"
	// StatusCanceled: the task or one of its ancestors was canceled.
	StatusCanceled Status = "canceled"
)

// Statuses lists every status, in the order of a task's life.
var Statuses = []Status{StatusReady, StatusPaused, StatusLimited, StatusUnserved, StatusSleeping, StatusRetrying, StatusSuspended, StatusRunning, StatusStale, StatusDone, StatusFailed, StatusCanceled}

// Ended reports whether s is a final status: done, failed or canceled.
func (s Status) Ended() bool { return s == StatusDone || s == StatusFailed || s == StatusCanceled }

// ParseStatus returns the status named s, or an error listing the valid ones.
func ParseStatus(s string) (Status, error) {
	for _, v := range Statuses {
		if string(v) == s {
			return v, nil
		}
	}
	return "", fmt.Errorf("invalid status %q: want one of %v", s, Statuses)
}
