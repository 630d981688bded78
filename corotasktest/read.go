package corotasktest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/corotask/corotask/tasks"
)

// State reads task id's stored state, decoded into S (S's zero value for a
// task stored with none). It fails the test when the task cannot be read or
// its state does not decode into S.
func State[S any](t testing.TB, db tasks.DB, id tasks.ID) S {
	t.Helper()
	task := get(t, db, id)
	var s S
	if len(task.State) > 0 && string(task.State) != "null" {
		if err := json.Unmarshal(task.State, &s); err != nil {
			t.Fatalf("corotasktest: task %s (%s): state %s does not decode into %T: %v", id, task.Type, task.State, s, err)
		}
	}
	return s
}

// Result reads the result of task id, which must have ended with Done or
// DoneWith, decoded into R (R's zero value after Done). It fails the test
// when the task has not ended done, saying how it stands.
func Result[R any](t testing.TB, db tasks.DB, id tasks.ID) R {
	t.Helper()
	task := get(t, db, id)
	var r R
	if task.Status != tasks.StatusDone {
		if task.LastError != "" {
			t.Fatalf("corotasktest: task %s (%s) is %s, not done; last error: %s", id, task.Type, task.Status, task.LastError)
		}
		t.Fatalf("corotasktest: task %s (%s) is %s, not done", id, task.Type, task.Status)
	}
	if len(task.Result) > 0 && string(task.Result) != "null" {
		if err := json.Unmarshal(task.Result, &r); err != nil {
			t.Fatalf("corotasktest: task %s (%s): result %s does not decode into %T: %v", id, task.Type, task.Result, r, err)
		}
	}
	return r
}

func get(t testing.TB, db tasks.DB, id tasks.ID) *tasks.Task {
	t.Helper()
	task, err := tasks.Get(context.Background(), db, id)
	if err != nil {
		t.Fatalf("corotasktest: read task %s: %v", id, err)
	}
	return task
}
