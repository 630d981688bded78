package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// showJSON is a task as `show --json` prints it: the fields of `ls --json`,
// its pending messages and how many children it has in each status.
type showJSON struct {
	taskJSON
	Inbox     []inboxJSON    `json:"inbox"`
	InboxNext []messageJSON  `json:"inbox_next"`
	Children  map[string]int `json:"children"`
	History   []historyJSON  `json:"history"` // the last entries, oldest first
}

// inboxJSON is a message of the inbox as `show --json` prints it: with its
// digest, which 'corotask drop-message --digest' takes.
type inboxJSON struct {
	messageJSON
	Digest string `json:"digest"`
}

// showHistory is how many of the last entries of its history show prints.
const showHistory = 5

var showCmd = &command{
	name:    "show",
	args:    taskRefArgs,
	summary: "show everything about one task",
	help: `Show everything about task TASK: its type, status, priority, limit key
(when it has one), parent and the root of its workflow (for a task with a
parent), its state as indented JSON, the messages in its
inbox and inbox_next with when each was sent, the executor holding it and
the age of its heartbeat, its failures and last error, its result, how many
children it has in each status, and the last 5 entries of its history (see
'corotask history'). With --json, print one JSON object (see docs/cli.md).
With --type and --key instead of TASK, show the live task of that type with
that key.`,
	example: `corotask show 01JD7X3M5Q8R9S2T4V6W8Y0Z1A
corotask show --type orders.checkout --key order-42
corotask show --json 01JD7X3M5Q8R9S2T4V6W8Y0Z1A | jq .state`,
	flags: func(fs *flag.FlagSet) runFunc {
		asJSON := fs.Bool("json", false, "print JSON")
		ref := taskRefFlags(fs, "show")
		return func(ctx context.Context, a *app, args []string) error {
			if _, err := ref.parse(args); err != nil {
				return err
			}
			var (
				t        *tasks.Task
				children map[tasks.Status]int
				h        []tasks.HistoryEntry
				more     bool
				hosts    map[tasks.ID]tasks.Executor
				now      time.Time
			)
			err := a.readSnapshot(ctx, func(tx pgx.Tx, txNow time.Time) error {
				now = txNow
				id, err := ref.resolve(ctx, tx)
				if err != nil {
					return err
				}
				if t, err = tasks.Get(ctx, tx, id); err != nil {
					return err
				}
				if children, err = countChildren(ctx, tx, id); err != nil {
					return err
				}
				if h, more, err = tasks.LastHistory(ctx, tx, id, showHistory); err != nil {
					return err
				}
				hosts, err = executorsByID(ctx, tx)
				return err
			})
			if err != nil {
				return taskError(err)
			}
			if *asJSON {
				out := showJSON{
					taskJSON:  toJSON(t),
					Inbox:     make([]inboxJSON, 0, len(t.Inbox)),
					InboxNext: decodeMessages(t.InboxNext),
					Children:  make(map[string]int, len(tasks.Statuses)),
					History:   make([]historyJSON, 0, len(h)),
				}
				for _, m := range t.Inbox {
					out.Inbox = append(out.Inbox, inboxJSON{decodeMessage(m), tasks.MessageDigest(m)})
				}
				for _, s := range tasks.Statuses {
					out.Children[string(s)] = children[s]
				}
				for _, e := range h {
					out.History = append(out.History, toHistoryJSON(e, hosts))
				}
				return writeJSON(a.stdout, out)
			}
			return printTask(a.stdout, t, children, h, more, hosts, now)
		}
	},
}

// countChildren returns how many children the task has in each status.
func countChildren(ctx context.Context, db tasks.DB, id tasks.ID) (map[tasks.Status]int, error) {
	rows, err := db.Query(ctx, query.ChildrenByStatus, id)
	if err != nil {
		return nil, fmt.Errorf("count children: %w", err)
	}
	counts := make(map[tasks.Status]int)
	var status string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		counts[tasks.Status(status)] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count children: %w", err)
	}
	return counts, nil
}

func decodeMessages(raw []json.RawMessage) []messageJSON {
	out := make([]messageJSON, 0, len(raw))
	for _, m := range raw {
		out = append(out, decodeMessage(m))
	}
	return out
}

// printTask prints a task for people, with the last entries h of its
// history (more: there are others before them).
func printTask(w io.Writer, t *tasks.Task, children map[tasks.Status]int, h []tasks.HistoryEntry, more bool,
	hosts map[tasks.ID]tasks.Executor, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, oneLine(v)) }
	row("id", t.ID.String())
	row("uuid", t.ID.UUID()) // how SQL (send_to_task, the table) names it
	row("type", oneLine(string(t.Type)))
	if t.Key != "" {
		row("key", t.Key)
	}
	row("status", string(t.Status))
	row("priority", fmt.Sprint(t.Priority))
	if t.LimitKey != "" {
		row("limit_key", t.LimitKey)
	}
	row("parent", idOrDash(t.Parent))
	if !t.Parent.IsZero() {
		row("root", t.Root.String()) // the top of its workflow tree
	}
	row("created", timestamp(&t.CreatedAt, now))
	row("updated", timestamp(&t.UpdatedAt, now))
	row("wake_at", timestamp(t.WakeAt, now))
	if t.AwaitingChildren {
		// Why a suspended task is not woken by its children's completions.
		row("awaits", fmt.Sprintf("its children (AwaitChildren): %d not ended", t.LiveChildren))
	}
	holder := "-"
	if !t.ClaimedBy.IsZero() {
		holder = executorName(t.ClaimedBy, hosts)
		if _, ok := hosts[t.ClaimedBy]; ok {
			holder += " (executor " + t.ClaimedBy.String() + ")"
		} else {
			holder += " (not registered)"
		}
		holder += ", claimed " + relative(t.ClaimedAt, now)
	}
	row("held_by", holder)
	row("heartbeat", timestamp(&t.Heartbeat, now))
	row("done_at", timestamp(t.DoneAt, now))
	row("attempts", fmt.Sprint(t.Attempts))
	row("failures", fmt.Sprint(t.Failures))
	row("last_error", lastErrorLine(t, h))
	var counts []string
	for _, s := range tasks.Statuses {
		if n := children[s]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, s))
		}
	}
	if len(counts) == 0 {
		counts = []string{"none"}
	}
	row("children", strings.Join(counts, ", "))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "state:\n  %s\n", prettyJSON(t.State, "  "))
	fmt.Fprintf(w, "result:\n  %s\n", prettyJSON(t.Result, "  "))
	printMessages(w, "inbox", t.Inbox, now)
	printDigests(w, t.Inbox)
	printMessages(w, "inbox_next", t.InboxNext, now)
	switch {
	case len(h) == 0:
		fmt.Fprintln(w, "history: none")
		return nil
	case more:
		fmt.Fprintf(w, "history: the last %d entries ('corotask history %s' for all kept)\n", len(h), t.ID)
	case len(h) == 1:
		fmt.Fprintln(w, "history: 1 entry")
	default:
		fmt.Fprintf(w, "history: %d entries\n", len(h))
	}
	var b strings.Builder
	if err := printHistory(&b, h, hosts, now); err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if line != "" {
			fmt.Fprint(w, "  "+line)
		}
	}
	return nil
}

// lastErrorLine is the task's last error for show: "-" for none; the first
// line of a panic's (its message, without the stack) and where to read the
// stack.
func lastErrorLine(t *tasks.Task, h []tasks.HistoryEntry) string {
	if t.LastError == "" {
		return "-"
	}
	panicked := strings.Contains(t.LastError, "\n\ngoroutine ")
	withStack := false
	for _, e := range h {
		if e.Outcome == tasks.Panicked && e.Stack != "" {
			withStack = true
			if e.Error == t.LastError {
				panicked = true
			}
		}
	}
	if !panicked {
		return t.LastError
	}
	first, _, _ := strings.Cut(t.LastError, "\n")
	if !withStack {
		return fmt.Sprintf("%s (the stack: 'corotask show --json %s')", first, t.ID)
	}
	return fmt.Sprintf("%s (see 'corotask history --stack %s')", first, t.ID)
}

// printMessages prints a list of stored messages, one per line: their
// position, sender, when they were sent and body.
func printMessages(w io.Writer, name string, raw []json.RawMessage, now time.Time) {
	fmt.Fprintf(w, "%s: %s\n", name, plural(len(raw), "message"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, r := range raw {
		m := decodeMessage(r)
		from := "from " + idOrDash(m.From)
		if m.From.IsZero() {
			from = "from outside"
		}
		var flags string
		if m.Done {
			flags = "done"
			if m.Err != nil {
				flags += " (" + oneLine(*m.Err) + ")"
			}
		}
		fmt.Fprintf(tw, "  %d.\t%s\tsent %s\t%s\t%s\n", i+1, from, relative(m.SentAt, now), flags, compactJSON(m.Body))
	}
	tw.Flush()
}

// printDigests prints the digest of each message of the inbox, which
// 'corotask drop-message --digest' takes to drop the message read, and no
// other one.
func printDigests(w io.Writer, inbox []json.RawMessage) {
	if len(inbox) == 0 {
		return
	}
	fmt.Fprintln(w, "inbox digests (corotask drop-message TASK N --digest D):")
	for i, m := range inbox {
		fmt.Fprintf(w, "  %d. %s\n", i+1, tasks.MessageDigest(m))
	}
}
