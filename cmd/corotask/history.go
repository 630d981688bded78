package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

// historyJSON is one entry of a task's history as `history --json` prints it.
type historyJSON struct {
	Attempt    int             `json:"attempt"`
	Seq        int             `json:"seq"` // 0, but for the messages operators sent: 1, 2, ...
	Outcome    tasks.Outcome   `json:"outcome"`
	Action     *string         `json:"action"`
	Executor   tasks.ID        `json:"executor"` // null for an operator action
	Host       *string         `json:"host"`     // the executor's, while it is registered
	PID        *int            `json:"pid"`
	Actor      *string         `json:"actor"` // the database role of an operator action
	ClaimedAt  *time.Time      `json:"claimed_at"`
	FinishedAt time.Time       `json:"finished_at"`
	Error      *string         `json:"error"`
	Stack      *string         `json:"stack"`
	Popped     int             `json:"popped"`
	Spawned    int             `json:"spawned"`
	Sent       int             `json:"sent"`
	StateBytes int             `json:"state_bytes"`
	State      json.RawMessage `json:"state"`
	WakeAt     *time.Time      `json:"wake_at"`
	Message    json.RawMessage `json:"message"`
	// StateBefore is the state a set_state action replaced.
	StateBefore json.RawMessage `json:"state_before"`
}

var historyCmd = &command{
	name:    "history",
	args:    taskRefArgs,
	summary: "show what happened at each poll of a task",
	help: `Show the history of task TASK, one entry per line, oldest first: each poll
that ended (committed with its action, failed, panicked, claim lost, canceled,
taken over, released), each operator action (cancel, retry, reset, restart,
drop_message, set_state) and each message sent with 'corotask send' or the
web UI (send: no attempt of its own, it is numbered after the attempt it
came during or after, as 3.1, 3.2). BY is the executor that polled
(host:pid while it is registered, else its ID) or the database role of the
operator; TOOK is from the claim to the end; POPPED, SPAWNED and SENT count
the messages taken, the children spawned and the messages sent; STATE is the
state's size afterwards; ERROR is cut at 80 characters (--json has it
whole, each message sent or dropped, and the states set_state replaced and
set). Executors keep each task's first and last attempts (20 and 100 by
default): attempt numbers may jump. With --stack, the stack of each panicked
poll follows the table; with --json, print a JSON array (see docs/cli.md).
With --type and --key instead of TASK, show the history of the live task of
that type with that key.`,
	example: `corotask history 01JD7X3M5Q8R9S2T4V6W8Y0Z1A
corotask history --last 5 --stack 01JD7X3M5Q8R9S2T4V6W8Y0Z1A
corotask history --type orders.checkout --key order-42`,
	flags: func(fs *flag.FlagSet) runFunc {
		last := fs.String("last", "0", "show only the last `N` entries (default 0: all kept)")
		stacks := fs.Bool("stack", false, "print the stack of each panicked poll")
		asJSON := fs.Bool("json", false, "print JSON")
		ref := taskRefFlags(fs, "show the history of")
		return func(ctx context.Context, a *app, args []string) error {
			if _, err := ref.parse(args); err != nil {
				return err
			}
			n, err := parseCount("--last", *last, true)
			if err != nil {
				return err
			}
			var h []tasks.HistoryEntry
			var hosts map[tasks.ID]tasks.Executor
			var now time.Time
			err = a.readSnapshot(ctx, func(tx pgx.Tx, txNow time.Time) error {
				now = txNow
				id, err := ref.resolve(ctx, tx)
				if err != nil {
					return err
				}
				if h, err = tasks.History(ctx, tx, id, tasks.HistoryOptions{Last: n}); err != nil {
					return err
				}
				hosts, err = executorsByID(ctx, tx)
				return err
			})
			if err != nil {
				return taskError(err)
			}
			if *asJSON {
				out := make([]historyJSON, 0, len(h))
				for _, e := range h {
					out = append(out, toHistoryJSON(e, hosts))
				}
				return writeJSON(a.stdout, out)
			}
			if len(h) == 0 {
				fmt.Fprintln(a.stdout, "no history (the task has not been polled yet, or its type records none)")
				return nil
			}
			if err := printHistory(a.stdout, h, hosts, now); err != nil {
				return err
			}
			if *stacks {
				for _, e := range h {
					if e.Stack != "" {
						fmt.Fprintf(a.stdout, "\nattempt %d panicked: %s\n%s\n", e.Attempt, oneLine(e.Error), multiLine(e.Stack))
					}
				}
			}
			return nil
		}
	},
}

// executorsByID returns the registered executors by ID.
func executorsByID(ctx context.Context, db tasks.DB) (map[tasks.ID]tasks.Executor, error) {
	all, err := tasks.Executors(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make(map[tasks.ID]tasks.Executor, len(all))
	for _, x := range all {
		out[x.ID] = x
	}
	return out, nil
}

// who names the executor or the operator behind an attempt.
func who(e tasks.HistoryEntry, hosts map[tasks.ID]tasks.Executor) string {
	switch {
	case e.Actor != "":
		return oneLine(e.Actor)
	case e.Executor.IsZero():
		return "-"
	}
	return executorName(e.Executor, hosts)
}

// executorName is "host:pid" for a registered executor, else its ID.
func executorName(id tasks.ID, hosts map[tasks.ID]tasks.Executor) string {
	if x, ok := hosts[id]; ok {
		return fmt.Sprintf("%s:%d", oneLine(x.Host), x.PID)
	}
	return id.String()
}

// printHistory prints history entries as a table.
func printHistory(w io.Writer, h []tasks.HistoryEntry, hosts map[tasks.ID]tasks.Executor, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tOUTCOME\tACTION\tBY\tFINISHED\tTOOK\tPOPPED\tSPAWNED\tSENT\tSTATE\tERROR")
	for _, e := range h {
		took := "-"
		if e.ClaimedAt != nil {
			took = e.FinishedAt.Sub(*e.ClaimedAt).Round(time.Millisecond).String()
		}
		action, errText := "-", "-"
		if e.Action != "" {
			action = oneLine(e.Action)
		}
		if e.Error != "" {
			errText = truncate(oneLine(e.Error), maxErrorWidth)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", e.Number(), oneLine(string(e.Outcome)), action, who(e, hosts),
			relative(&e.FinishedAt, now), took, e.Popped, e.Spawned, e.Sent, bytesize(e.StateBytes), errText)
	}
	return tw.Flush()
}

func toHistoryJSON(e tasks.HistoryEntry, hosts map[tasks.ID]tasks.Executor) historyJSON {
	j := historyJSON{
		Attempt: e.Attempt, Seq: e.Seq, Outcome: e.Outcome, Executor: e.Executor, ClaimedAt: e.ClaimedAt,
		FinishedAt: e.FinishedAt, Popped: e.Popped, Spawned: e.Spawned, Sent: e.Sent,
		StateBytes: e.StateBytes, State: e.State, WakeAt: e.WakeAt, Message: e.Message, StateBefore: e.StateBefore,
		Action: optional(e.Action), Actor: optional(e.Actor), Error: optional(e.Error), Stack: optional(e.Stack),
	}
	if x, ok := hosts[e.Executor]; ok && !e.Executor.IsZero() {
		j.Host, j.PID = &x.Host, &x.PID
	}
	return j
}

// maxErrorWidth is how much of an error the history table shows; the rest
// is in --json (and in show's last_error).
const maxErrorWidth = 80

// truncate cuts s to n characters, ending it with "..." when cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}

// optional is nil for "", else s.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// bytesize prints a size in bytes for people: "512B", "3.2kB", "1.5MB".
func bytesize(n int) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%dB", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1fkB", float64(n)/1000)
	default:
		return fmt.Sprintf("%.1fMB", float64(n)/1000/1000)
	}
}
