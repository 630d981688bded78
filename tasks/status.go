package tasks

import "fmt"

// Status is where a task is in its life. It is derived from the stored
// columns, not stored itself.
type Status string

const (
	// Ready: wake_at has passed and no executor holds the task; the next claim may take it.
	Ready Status = "ready"
	// Unserved: ready, but no live executor serves its type (see
	// Executors): those that did stopped or died, or none serves it; nothing
	// will poll it until one that does starts. Only reported once executors
	// have registered in the database: where none has (tasks polled only
	// through PollOnce), ready tasks are Ready.
	Unserved Status = "unserved"
	// Sleeping: wake_at is in the future, as the task's last poll asked.
	Sleeping Status = "sleeping"
	// Retrying: the task's last poll failed (Failures > 0) and it waits out
	// the backoff until WakeAt.
	Retrying Status = "retrying"
	// Suspended: no wake_at; the task waits for a message.
	Suspended Status = "suspended"
	// Running: an executor holds a claim on the task (its claim is set; not
	// running is exactly "claim IS NULL", and then Heartbeat is zero).
	Running Status = "running"
	// Stale: an executor holds a claim on the task, but the claim has
	// expired: that executor died or stalled, and another will take the
	// task over.
	Stale Status = "stale"
	// Done: the poller returned Done or DoneWith.
	Done Status = "done"
	// Failed: the task failed more times in a row than its type allows.
	Failed Status = "failed"
	// Canceled: the task or one of its ancestors was canceled.
	Canceled Status = "canceled"
)

// Statuses lists every status, in the order of a task's life.
var Statuses = []Status{Ready, Unserved, Sleeping, Retrying, Suspended, Running, Stale, Done, Failed, Canceled}

// Ended reports whether s is a final status: done, failed or canceled.
func (s Status) Ended() bool { return s == Done || s == Failed || s == Canceled }

// ParseStatus returns the status named s, or an error listing the valid ones.
func ParseStatus(s string) (Status, error) {
	for _, v := range Statuses {
		if string(v) == s {
			return v, nil
		}
	}
	return "", fmt.Errorf("invalid status %q: want one of %v", s, Statuses)
}
