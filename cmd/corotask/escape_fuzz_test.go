package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

// FuzzPrintersEscape: whatever text the rows hold, the printers of show,
// history (with its stacks) and tree print no character a terminal acts on
// but line breaks and tabs (which only the printers themselves write, and
// the stacks keep).
func FuzzPrintersEscape(f *testing.F) {
	for _, s := range []string{"plain", nasty, "\x00\x01\x7f\u0085\u009b", "\u202e\u2066\u200b\ufeff", "a\r\nb\tc\v\f", "\xff\xfe",
		"\U000E0041\U000E007F", "\u2028\u2029"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		str, err := json.Marshal(s) // as the database returns a JSON string: valid
		require.NoError(t, err)
		host := tasks.NewID()
		task := &tasks.Task{
			ID: tasks.NewID(), Type: tasks.Type(s), Status: tasks.Status(s), LastError: s, CreatedAt: now, UpdatedAt: now,
			State: json.RawMessage(`{"k":` + string(str) + `}`), Result: json.RawMessage(str),
			Inbox:     []json.RawMessage{json.RawMessage(`{"body":` + string(str) + `,"err":` + string(str) + `,"done":true}`), json.RawMessage(str)},
			ClaimedBy: host, ClaimedAt: &now,
		}
		hosts := map[tasks.ID]tasks.Executor{host: {ID: host, Host: s}}
		h := []tasks.HistoryEntry{
			{Task: task.ID, Attempt: 1, Outcome: tasks.Outcome(s), Action: s, Executor: host, FinishedAt: now, Error: s, Stack: s},
			{Task: task.ID, Attempt: 2, Outcome: tasks.Panicked, Actor: s, FinishedAt: now, Error: s + "\n\ngoroutine 1", Stack: s},
		}
		var out strings.Builder
		require.NoError(t, printTask(&out, task, map[tasks.Status]int{tasks.Status(s): 1}, h, false, hosts, now))
		require.NoError(t, printHistory(&out, h, hosts, now))
		require.NoError(t, printTree(&out, []treeNode{{ID: task.ID, Type: s, Status: s}, {ID: tasks.NewID(), Parent: task.ID, Type: s, Status: s}}))
		for _, e := range h {
			out.WriteString(multiLine(e.Stack))
		}
		requireTerminalSafe(t, "printers", out.String())
	})
}
