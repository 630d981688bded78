package faults

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// Ledger is what Check found in the ledger and the tasks table.
type Ledger struct {
	// Tasks by "type outcome" ("fault.node done", "fault.victim live"...).
	Tasks      map[string]int
	TasksTotal int
	Live       int // tasks that have not ended

	// Messages by kind, and in total.
	Messages map[string]*MessageFigures
	Total    MessageFigures

	// Completions: one per child that ended, to its parent.
	Children, CompletionsOnce, CompletionsMissing, CompletionsExtra int

	// Committed polls, and what is wrong with their sequence.
	CommittedPolls int
	DoubleCommits  int // two committed polls with the same seq: both saw one state
	SeqGaps        int // tasks whose committed polls do not number 1..N
	StateMismatch  int // tasks whose stored Polls counter is not the number of committed polls
	Overlaps       int // committed polls that began before the previous one committed
	// AwaitedPolls counts the committed polls, among those the history
	// keeps, that returned AwaitChildren: the workload exercised it.
	AwaitedPolls int

	Anomalies []string // what pollers saw that must not happen (at most 20)
	Unended   []string // tasks that did not end (at most 20)
	Outcomes  []string // tasks that ended in the wrong way (at most 20)
	Phantoms  int      // messages consumed or pending that nobody sent
}

// MessageFigures counts messages of one kind. Every message sent must be
// consumed by exactly one committed poll of its recipient or still be in its
// recipient's inbox (or inbox_next).
type MessageFigures struct {
	Sent         int // distinct message IDs
	SentTwice    int // IDs with more than one sent row
	Consumed     int // consumed rows
	Pending      int // still in an inbox
	Lost         int // neither consumed nor pending
	Duplicated   int // consumed or pending more than once in all
	Misdelivered int // consumed or pending in another task than the recipient
}

func (m *MessageFigures) add(o MessageFigures) {
	m.Sent += o.Sent
	m.SentTwice += o.SentTwice
	m.Consumed += o.Consumed
	m.Pending += o.Pending
	m.Lost += o.Lost
	m.Duplicated += o.Duplicated
	m.Misdelivered += o.Misdelivered
}

// Violations lists every broken promise, empty when all held.
func (l *Ledger) Violations() []string {
	var v []string
	add := func(n int, what string) {
		if n != 0 {
			v = append(v, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(l.Live, "tasks did not end")
	for _, s := range l.Unended {
		v = append(v, "  not ended: "+s)
	}
	add(len(l.Outcomes), "tasks ended the wrong way")
	for _, s := range l.Outcomes {
		v = append(v, "  "+s)
	}
	add(l.Total.Lost, "messages lost")
	add(l.Total.Duplicated, "messages consumed (or pending) more than once")
	add(l.Total.SentTwice, "messages sent twice (an OnCommit ran twice)")
	add(l.Total.Misdelivered, "messages delivered to the wrong task")
	add(l.Phantoms, "messages consumed that nobody sent")
	add(l.CompletionsMissing, "children whose parent got no completion")
	add(l.CompletionsExtra, "children whose parent got more than one completion")
	add(l.DoubleCommits, "committed polls that repeat a poll of the same state")
	add(l.SeqGaps, "tasks whose committed polls have gaps")
	add(l.StateMismatch, "tasks whose state is not that of their last committed poll")
	add(l.Overlaps, "committed polls that overlapped the previous committed poll of their task")
	add(len(l.Anomalies), "anomalies seen by pollers")
	for _, s := range l.Anomalies {
		v = append(v, "  anomaly: "+s)
	}
	return v
}

// pendingCTE lists the messages still in inboxes, with the ledger ID of each:
// a completion's is derived from its sender, any other's is its body's id.
const pendingCTE = `pending AS (
    SELECT m.task_id,
        CASE WHEN coalesce((m.envelope->>'done')::boolean, false) THEN 'done-' || (m.envelope->>'from')
             ELSE m.envelope->'body'->>'id' END AS msg_id
    FROM corotask.messages m
)`

// expectedOutcome is how each type of the workload must end.
var expectedOutcome = map[tasks.Type]string{
	TypeRoot: "done", TypeNode: "done", TypeDoomed: "failed", TypeVictim: "canceled",
}

// Check reads the ledger and the tasks table of db and returns the figures.
// It does not fail on violations: see Ledger.Violations.
func Check(ctx context.Context, db tasks.DB) (*Ledger, error) {
	l := &Ledger{Tasks: map[string]int{}, Messages: map[string]*MessageFigures{}}

	// Tasks.
	rows, err := db.Query(ctx, `SELECT task_type, coalesce(outcome, 'live'), count(*) FROM corotask.tasks GROUP BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("check tasks: %w", err)
	}
	for rows.Next() {
		var typ, outcome string
		var n int
		if err := rows.Scan(&typ, &outcome, &n); err != nil {
			rows.Close()
			return nil, err
		}
		l.Tasks[typ+" "+outcome] += n
		l.TasksTotal += n
		if outcome == "live" {
			l.Live += n
		} else if want, ok := expectedOutcome[tasks.Type(typ)]; ok && want != outcome {
			l.Outcomes = append(l.Outcomes, fmt.Sprintf("%d %s tasks %s, want %s", n, typ, outcome, want))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// The status as the CLI reads it (query.Status), which runs on Citus
	// too, where corotask.status(t) does not.
	if l.Unended, err = strs(ctx, db, `WITH `+query.Served+`
		SELECT t.task_type || ' ' || t.task_id || ' ' || `+query.Status+` ||
		' failures=' || t.failures || coalesce(' last_error=' || t.last_error, '')
		FROM corotask.tasks t, served s WHERE t.done_at IS NULL ORDER BY t.task_id LIMIT 20`); err != nil {
		return nil, err
	}

	// Messages: every distinct ID sent, against what was consumed and what is pending.
	rows, err = db.Query(ctx, `WITH `+pendingCTE+`,
	s AS (SELECT msg_id, count(*) AS n, (array_agg(to_task))[1] AS to_task, min(kind) AS kind
	      FROM faults.sent GROUP BY msg_id),
	c AS (SELECT c.msg_id, count(*) AS n, count(*) FILTER (WHERE c.task_id <> s.to_task) AS wrong
	      FROM faults.consumed c JOIN s USING (msg_id) GROUP BY c.msg_id),
	p AS (SELECT p.msg_id, count(*) AS n, count(*) FILTER (WHERE p.task_id <> s.to_task) AS wrong
	      FROM pending p JOIN s USING (msg_id) GROUP BY p.msg_id)
	SELECT s.kind, count(*), count(*) FILTER (WHERE s.n > 1),
	       coalesce(sum(c.n), 0), coalesce(sum(p.n), 0),
	       count(*) FILTER (WHERE coalesce(c.n, 0) + coalesce(p.n, 0) = 0),
	       count(*) FILTER (WHERE coalesce(c.n, 0) + coalesce(p.n, 0) > 1),
	       count(*) FILTER (WHERE coalesce(c.wrong, 0) + coalesce(p.wrong, 0) > 0)
	FROM s LEFT JOIN c USING (msg_id) LEFT JOIN p USING (msg_id)
	GROUP BY s.kind`)
	if err != nil {
		return nil, fmt.Errorf("check messages: %w", err)
	}
	for rows.Next() {
		var kind string
		var m MessageFigures
		if err := rows.Scan(&kind, &m.Sent, &m.SentTwice, &m.Consumed, &m.Pending, &m.Lost, &m.Duplicated, &m.Misdelivered); err != nil {
			rows.Close()
			return nil, err
		}
		l.Messages[kind] = &m
		l.Total.add(m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	// Phantoms: consumed or pending IDs nobody sent, except the completions of
	// children that failed or were canceled (sent by the database itself).
	if err := db.QueryRow(ctx, `WITH `+pendingCTE+`,
	seen AS (SELECT msg_id FROM faults.consumed UNION ALL SELECT msg_id FROM pending)
	SELECT count(*) FROM seen
	WHERE msg_id IS NULL OR (NOT EXISTS (SELECT 1 FROM faults.sent s WHERE s.msg_id = seen.msg_id)
	  AND NOT EXISTS (SELECT 1 FROM corotask.tasks c
	                  WHERE 'done-' || c.task_id = seen.msg_id AND c.outcome IN ('failed', 'canceled')))`).Scan(&l.Phantoms); err != nil {
		return nil, fmt.Errorf("check phantoms: %w", err)
	}

	// Completions: each child that ended, exactly once to its parent.
	if err := db.QueryRow(ctx, `WITH `+pendingCTE+`,
	got AS (
	    SELECT ch.task_id,
	        (SELECT count(*) FROM faults.consumed k WHERE k.msg_id = 'done-' || ch.task_id AND k.task_id = ch.parent_id)
	      + (SELECT count(*) FROM pending p WHERE p.msg_id = 'done-' || ch.task_id AND p.task_id = ch.parent_id) AS n
	    FROM corotask.tasks ch WHERE ch.parent_id IS NOT NULL AND ch.done_at IS NOT NULL
	)
	SELECT count(*), count(*) FILTER (WHERE n = 1), count(*) FILTER (WHERE n = 0), count(*) FILTER (WHERE n > 1) FROM got`).
		Scan(&l.Children, &l.CompletionsOnce, &l.CompletionsMissing, &l.CompletionsExtra); err != nil {
		return nil, fmt.Errorf("check completions: %w", err)
	}

	// Committed polls: per task, numbered 1..N, once each, the stored state
	// being that of poll N, each begun after the previous one committed.
	if err := db.QueryRow(ctx, `WITH per_task AS (
	    SELECT t.task_id, count(p.poll_id) AS n, count(DISTINCT p.seq) AS d, coalesce(max(p.seq), 0) AS mx,
	           coalesce((t.inner_state->>'Polls')::int, 0) AS st
	    FROM corotask.tasks t LEFT JOIN faults.polls p USING (task_id)
	    WHERE t.task_type <> $1
	    GROUP BY t.task_id, t.inner_state
	)
	SELECT coalesce(sum(n), 0), coalesce(sum(n - d), 0), count(*) FILTER (WHERE d <> mx), count(*) FILTER (WHERE mx <> st)
	FROM per_task`, string(TypeDoomed)).Scan(&l.CommittedPolls, &l.DoubleCommits, &l.SeqGaps, &l.StateMismatch); err != nil {
		return nil, fmt.Errorf("check polls: %w", err)
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM corotask.history WHERE outcome = 'committed' AND action = 'await'`).
		Scan(&l.AwaitedPolls); err != nil {
		return nil, fmt.Errorf("check awaited polls: %w", err)
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM (
	    SELECT started_at, lag(committed_at) OVER (PARTITION BY task_id ORDER BY seq, committed_at) AS prev
	    FROM faults.polls) p
	WHERE started_at < prev`).Scan(&l.Overlaps); err != nil {
		return nil, fmt.Errorf("check overlaps: %w", err)
	}

	if l.Anomalies, err = strs(ctx, db, `SELECT task_id || ': ' || what FROM faults.anomalies ORDER BY at LIMIT 20`); err != nil {
		return nil, err
	}
	return l, nil
}

func strs(ctx context.Context, db tasks.DB, q string) ([]string, error) {
	rows, err := db.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	return out, nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// String prints the figures as a small table.
func (l *Ledger) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tasks: %d (live %d)\n", l.TasksTotal, l.Live)
	for _, k := range sortedKeys(l.Tasks) {
		fmt.Fprintf(&b, "  %-24s %d\n", k, l.Tasks[k])
	}
	fmt.Fprintf(&b, "messages: sent %d, consumed %d, still in an inbox %d, lost %d, duplicated %d, sent twice %d, misdelivered %d, phantom %d\n",
		l.Total.Sent, l.Total.Consumed, l.Total.Pending, l.Total.Lost, l.Total.Duplicated, l.Total.SentTwice, l.Total.Misdelivered, l.Phantoms)
	for _, k := range sortedKeys(l.Messages) {
		m := l.Messages[k]
		fmt.Fprintf(&b, "  %-8s sent %d, consumed %d, pending %d, lost %d, duplicated %d\n", k, m.Sent, m.Consumed, m.Pending, m.Lost, m.Duplicated)
	}
	fmt.Fprintf(&b, "completions: %d children, exactly one %d, missing %d, extra %d\n",
		l.Children, l.CompletionsOnce, l.CompletionsMissing, l.CompletionsExtra)
	fmt.Fprintf(&b, "committed polls: %d, double commits %d, sequence gaps %d, state mismatches %d, overlaps %d; %d recorded awaiting their children\n",
		l.CommittedPolls, l.DoubleCommits, l.SeqGaps, l.StateMismatch, l.Overlaps, l.AwaitedPolls)
	fmt.Fprintf(&b, "anomalies: %d\n", len(l.Anomalies))
	return b.String()
}
