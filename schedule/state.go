package schedule

import (
	"encoding/json"
	"time"

	"github.com/corotask/corotask/tasks"
)

// state is a schedule task's state.
type state struct {
	Spec   Spec `json:"spec"`
	Paused bool `json:"paused,omitempty"`
	// LastSlot is the latest slot the schedule dealt with (run or
	// skipped); Next the next one (zero: to be computed from now, as for a
	// new, resumed or changed schedule).
	LastSlot time.Time `json:"last_slot,omitzero"`
	Next     time.Time `json:"next,omitzero"`
	// LastTask is the task of the latest slot run, and LastTaskLive whether
	// its completion message has not come yet.
	LastTask     tasks.ID `json:"last_task,omitzero"`
	LastTaskLive bool     `json:"last_task_live,omitempty"`
	// Runs counts the tasks created, Skipped the slots not run.
	Runs    int `json:"runs,omitempty"`
	Skipped int `json:"skipped,omitempty"`
}

// message is what Ensure, Pause, Resume, Delete and Backfill send a
// schedule.
type message struct {
	Op   string    `json:"op"` // opUpdate, opPause, ...
	Spec *Spec     `json:"spec,omitempty"`
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
}

const (
	opUpdate   = "update"
	opPause    = "pause"
	opResume   = "resume"
	opDelete   = "delete"
	opBackfill = "backfill"
)

func sameSpec(a, b Spec) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
