package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/corotask/corotask/internal/database"
	"github.com/corotask/corotask/internal/envelope"
	"github.com/corotask/corotask/tasks"
)

// view is what every page's template gets.
type view struct {
	Prefix   string
	Token    string // the CSRF token of action forms
	ReadOnly bool
	Now      time.Time // the database's time of the snapshot the page shows
	Title    string
	Nav      string // the navigation entry to mark
	// Live is the path of the page's live updates; empty for none.
	Live string
	// Flash is a message about an action that was done; Error one about an
	// action or input that was refused.
	Flash, Error string
	P            any // the page's own data
}

// Ago describes t relative to the page's time.
func (v *view) Ago(t any) string {
	switch t := t.(type) {
	case time.Time:
		return relative(&t, v.Now)
	case *time.Time:
		return relative(t, v.Now)
	}
	return ""
}

// Time prints t in UTC, to the millisecond, or "" for none.
func (v *view) Time(t any) string {
	switch t := t.(type) {
	case time.Time:
		if !t.IsZero() {
			return t.UTC().Format("2006-01-02 15:04:05.000Z")
		}
	case *time.Time:
		if t != nil && !t.IsZero() {
			return t.UTC().Format("2006-01-02 15:04:05.000Z")
		}
	}
	return ""
}

// Task returns the path of a task's page.
func (v *view) Task(id tasks.ID) string { return v.Prefix + "/tasks/" + id.String() }

// Dur prints a duration for people.
func (v *view) Dur(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return shortDuration(d)
}

// page reads what a page shows.
type page struct {
	name string // the template: templates/page_NAME.html
	nav  string
	load func(ctx context.Context, h *Handler, r *http.Request, tx pgx.Tx, v *view) error
}

// pageRoutes maps each page's path (below the prefix) to the page.
func (h *Handler) pageRoutes() map[string]page {
	return map[string]page{
		"/{$}":             {name: "overview", nav: "overview", load: loadOverview},
		"/tasks":           {name: "tasks", nav: "tasks", load: loadTasks},
		"/tasks/{id}":      {name: "task", nav: "tasks", load: loadTask},
		"/tasks/{id}/tree": {name: "tree", nav: "tasks", load: loadTree},
		"/executors":       {name: "executors", nav: "executors", load: loadExecutors},
	}
}

// pageError is an error that a page shows as it is, with its HTTP status.
type pageError struct {
	status int
	msg    string
}

func (e *pageError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &pageError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// errorStatus returns the HTTP status and the message to show for err.
func (h *Handler) errorStatus(err error) (int, string) {
	var pe *pageError
	switch {
	case errors.As(err, &pe):
		return pe.status, pe.msg
	case errors.Is(err, tasks.ErrNotFound):
		return http.StatusNotFound, sentinelText(err)
	case errors.Is(err, tasks.ErrEnded):
		return http.StatusConflict, sentinelText(err)
	case errors.Is(err, tasks.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, sentinelText(err)
	case errors.Is(err, tasks.ErrRunning), errors.Is(err, tasks.ErrWrongStatus):
		return http.StatusConflict, sentinelText(err)
	case errors.Is(err, tasks.ErrNoMessage):
		return http.StatusBadRequest, sentinelText(err)
	case errors.Is(err, context.Canceled):
		return 499, "canceled"
	}
	h.cfg.Logger.Error("ui: request failed", "error", err)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.Contains(pgErr.Message, "corotask") {
		switch pgErr.Code {
		case "3F000", "42P01", "42883", "42703": // no such schema, table, function, column
			return http.StatusInternalServerError, "The corotask schema of this database is missing or older than this UI: " +
				"run 'corotask migrate' (" + database.ErrorText(err) + ")"
		}
	}
	// The text of an error from the database or the driver names no
	// password (database.ErrorText masks any).
	return http.StatusInternalServerError, "internal error: " + database.ErrorText(err)
}

// sentinelText returns the part of err that names the condition and the task
// ("task has ended: 01J..."), without the operation around it.
func sentinelText(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		inner := errors.Unwrap(e)
		for _, s := range []error{tasks.ErrNotFound, tasks.ErrEnded, tasks.ErrTooLarge, tasks.ErrRunning, tasks.ErrWrongStatus, tasks.ErrNoMessage} {
			if inner == s {
				return e.Error()
			}
		}
	}
	return err.Error()
}

// newView returns the view of a request, before the page is loaded.
func (h *Handler) newView(pg page) *view {
	v := &view{Prefix: h.cfg.Prefix, ReadOnly: h.cfg.ReadOnly, Nav: pg.nav}
	if !h.cfg.ReadOnly {
		v.Token = h.token
	}
	return v
}

// read loads a page in one read-only snapshot of the database.
func (h *Handler) read(ctx context.Context, pg page, r *http.Request, v *view) error {
	return pgx.BeginTxFunc(ctx, h.cfg.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT now()").Scan(&v.Now); err != nil {
			return fmt.Errorf("read time: %w", err)
		}
		return pg.load(ctx, h, r, tx, v)
	})
}

// servePage serves a page whole.
func (h *Handler) servePage(pg page) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := h.newView(pg)
		v.Flash = flashText(r.URL.Query().Get("done"))
		v.Live = h.cfg.Prefix + "/live" + strings.TrimPrefix(r.URL.Path, h.cfg.Prefix)
		if q := liveQuery(r.URL.Query()); q != "" {
			v.Live += "?" + q
		}
		status, name := http.StatusOK, pg.name
		if err := h.read(r.Context(), pg, r, v); err != nil {
			status, v.Error = h.errorStatus(err)
			v.P, v.Live, name = nil, "", "error"
		}
		h.write(w, status, name, v)
	}
}

// liveQuery is a page's query without what only concerns one load (the
// message about an action).
func liveQuery(q url.Values) string {
	q = maps(q)
	q.Del("done")
	return q.Encode()
}

func maps(q url.Values) url.Values {
	out := make(url.Values, len(q))
	for k, v := range q {
		out[k] = slices.Clone(v)
	}
	return out
}

// write renders a page whole.
func (h *Handler) write(w http.ResponseWriter, status int, name string, v *view) {
	if v.Title == "" {
		v.Title = "corotask"
	}
	b, err := h.pages.render(name, "layout.html", v)
	if err != nil {
		h.cfg.Logger.Error("ui: render", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}

// flashText is the message shown after an action, by its name.
func flashText(done string) string {
	return map[string]string{
		"send":    "Message sent.",
		"cancel":  "Task canceled.",
		"retry":   "Task woken for a retry now.",
		"restart": "Task restarted.",
		"drop":    "Message dropped (the task's history keeps it).",
	}[done]
}

// parseTaskID reads the {id} of a path.
func parseTaskID(r *http.Request) (tasks.ID, error) {
	id, err := tasks.ParseID(r.PathValue("id"))
	if err != nil {
		return tasks.ID{}, &pageError{http.StatusNotFound, err.Error()}
	}
	return id, nil
}

// overview is the overview page's data.
type overview struct {
	Types     []string
	Counts    map[string]map[string]count // type, status
	Totals    map[string]count            // status
	Total     count
	Activity  []*typeActivity
	Failing   []taskRow
	Failed    []taskRow
	Estimated bool
	// Unserved are the types of ready tasks that no live executor serves.
	Unserved []string
	// Executors is how many executors are live, and Slots their summed
	// concurrency; Claims how many tasks they hold.
	Executors, Slots, Claims int
}

// Count returns the count of a type (all types for "") in a status.
func (o *overview) Count(typ string, status tasks.Status) count {
	if typ == "" {
		return o.Totals[string(status)]
	}
	return o.Counts[typ][string(status)]
}

func loadOverview(ctx context.Context, h *Handler, r *http.Request, tx pgx.Tx, v *view) error {
	rows, err := tableRows(ctx, tx)
	if err != nil {
		return err
	}
	pct := samplePercent(rows, h.cfg.CountThreshold)
	counts, err := countTasks(ctx, tx, "", pct)
	if err != nil {
		return err
	}
	o := &overview{Counts: make(map[string]map[string]count), Totals: make(map[string]count), Estimated: pct > 0}
	for _, c := range counts {
		if o.Counts[c.Type] == nil {
			o.Counts[c.Type] = make(map[string]count)
			o.Types = append(o.Types, c.Type)
		}
		o.Counts[c.Type][c.Status] = c
		t := o.Totals[c.Status]
		t.N, t.Estimated = t.N+c.N, t.Estimated || c.Estimated
		o.Totals[c.Status] = t
		o.Total.N, o.Total.Estimated = o.Total.N+c.N, o.Total.Estimated || c.Estimated
	}
	acts, err := activity(ctx, tx, pct)
	if err != nil {
		return err
	}
	for typ, a := range acts {
		if o.Counts[typ] == nil {
			o.Counts[typ] = make(map[string]count)
			o.Types = append(o.Types, typ)
		}
		o.Activity = append(o.Activity, a)
	}
	slices.Sort(o.Types)
	slices.SortFunc(o.Activity, func(a, b *typeActivity) int { return strings.Compare(a.Type, b.Type) })
	if o.Failing, err = failingTasks(ctx, tx, 10); err != nil {
		return err
	}
	if o.Failed, err = recentlyFailed(ctx, tx, 10); err != nil {
		return err
	}
	if o.Unserved, err = unservedTypes(ctx, tx); err != nil {
		return err
	}
	if o.Executors, o.Slots, o.Claims, err = liveExecutors(ctx, tx); err != nil {
		return err
	}
	v.Title, v.P = "Overview · corotask", o
	return nil
}

// taskList is the tasks page's data.
type taskList struct {
	Q         listQuery
	Form      url.Values // the filters as given, to fill the form again
	Rows      []taskRow
	Next      string // the next page's URL; empty on the last page
	Counts    map[string]count
	Total     count
	Prefix    string
	Estimated bool
}

// With returns the URL of the list with one filter changed (an empty value
// removes it), from the first page.
func (l *taskList) With(key, value string) string {
	q := maps(l.Form)
	q.Del("after")
	if value == "" {
		q.Del(key)
	} else {
		q.Set(key, value)
	}
	if len(q) == 0 {
		return l.Prefix + "/tasks"
	}
	return l.Prefix + "/tasks?" + q.Encode()
}

// maxPageSize is the most tasks one page lists.
const maxPageSize = 500

// parseListQuery reads the tasks page's filters, or says which is wrong.
func parseListQuery(q url.Values, now time.Time) (listQuery, error) {
	l := listQuery{Type: strings.TrimSpace(q.Get("type")), Limit: 50}
	if s := q.Get("status"); s != "" {
		st, err := tasks.ParseStatus(s)
		if err != nil {
			return l, badRequest("status: %v", err)
		}
		l.Status = st
	}
	var err error
	if s := q.Get("parent"); s != "" {
		if l.Parent, err = tasks.ParseID(s); err != nil {
			return l, badRequest("parent: %v", err)
		}
	}
	if s := q.Get("after"); s != "" {
		if l.After, err = tasks.ParseID(s); err != nil {
			return l, badRequest("after: %v", err)
		}
	}
	switch q.Get("failing") {
	case "", "0", "false":
	case "1", "true", "on":
		l.Failing = true
	default:
		return l, badRequest("failing: %q is not a yes or no (give 1 or 0)", q.Get("failing"))
	}
	switch q.Get("sort") {
	case "", "newest":
		l.Newest = true
	case "oldest":
	default:
		return l, badRequest("sort: %q is not a sort order: want newest or oldest", q.Get("sort"))
	}
	if l.Since, err = parseWhen(q.Get("since"), now); err != nil {
		return l, badRequest("since: %v", err)
	}
	if l.Until, err = parseWhen(q.Get("until"), now); err != nil {
		return l, badRequest("until: %v", err)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPageSize {
			return l, badRequest("limit: %q is not a number from 1 to %d", s, maxPageSize)
		}
		l.Limit = n
	}
	return l, nil
}

// parseWhen reads a time: a duration before now ("15m", "2h"), or an
// RFC 3339 time or date; "" is no time.
func parseWhen(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration before now (15m, 2h) nor a time (2026-01-02T15:04:05Z)", s)
}

func loadTasks(ctx context.Context, h *Handler, r *http.Request, tx pgx.Tx, v *view) error {
	form := r.URL.Query()
	l := &taskList{Form: maps(form), Prefix: h.cfg.Prefix}
	l.Form.Del("done")
	var err error
	if l.Q, err = parseListQuery(form, v.Now); err != nil {
		return err
	}
	var more bool
	if l.Rows, more, err = listTasks(ctx, tx, l.Q); err != nil {
		return err
	}
	if more {
		q := maps(l.Form)
		q.Set("after", l.Rows[len(l.Rows)-1].ID.String())
		l.Next = h.cfg.Prefix + "/tasks?" + q.Encode()
	}
	rows, err := tableRows(ctx, tx)
	if err != nil {
		return err
	}
	pct := samplePercent(rows, h.cfg.CountThreshold)
	counts, err := countTasks(ctx, tx, l.Q.Type, pct)
	if err != nil {
		return err
	}
	l.Counts, l.Estimated = make(map[string]count), pct > 0
	for _, c := range counts {
		t := l.Counts[c.Status]
		t.N, t.Estimated = t.N+c.N, t.Estimated || c.Estimated
		l.Counts[c.Status] = t
		l.Total.N, l.Total.Estimated = l.Total.N+c.N, l.Total.Estimated || c.Estimated
	}
	v.Title, v.P = "Tasks · corotask", l
	return nil
}

// message is an inbox message as the task page shows it.
type message struct {
	Index int
	From  tasks.ID
	Body  string
	Done  bool
	Err   string
	At    *time.Time
}

func decodeMessages(raw []json.RawMessage) []message {
	out := make([]message, 0, len(raw))
	for i, r := range raw {
		var env envelope.Envelope
		if err := json.Unmarshal(r, &env); err != nil {
			out = append(out, message{Index: i, Body: prettyJSON(r)})
			continue
		}
		out = append(out, message{Index: i, From: env.From, Body: prettyJSON(env.Body), Done: env.Done, Err: env.Err, At: env.At})
	}
	return out
}

// taskPage is the task page's data.
type taskPage struct {
	T         *tasks.Task
	Inbox     []message
	InboxNext []message
	Children  []taskRow
	// ChildCounts are the children in each status; Ended and Total count
	// them for the fan-in progress.
	ChildCounts  map[string]int64
	Ended, Total int64
	// History is the end of the task's history, the latest attempt first.
	History []historyEntry
	// Holder is the executor holding the task's claim; nil when none does
	// (or it is not registered).
	Holder *executorInfo
	// SendBody is the message typed in the send form, kept when it was
	// refused.
	SendBody string
}

// historyEntry is an attempt as the timeline shows it.
type historyEntry struct {
	tasks.HistoryEntry
	Host    string        // of the executor that ran the poll, when known
	Took    time.Duration // from the claim to the end of the poll
	Dropped string        // the message an operator dropped, indented
}

// Bad reports whether the attempt failed.
func (e historyEntry) Bad() bool {
	switch e.Outcome {
	case tasks.PollFailed, tasks.Panicked, tasks.ClaimLost, tasks.TakenOver:
		return true
	}
	return false
}

// ErrorText is the attempt's error without the stack that a panic's error
// ends with (Stack holds it).
func (e historyEntry) ErrorText() string {
	if e.Stack == "" {
		return e.Error
	}
	msg, _, _ := strings.Cut(e.Error, "\n\ngoroutine ")
	return msg
}

// maxHistory is how many attempts the task page shows.
const maxHistory = 25

// maxChildren is how many children the task page lists.
const maxChildren = 100

func loadTask(ctx context.Context, h *Handler, r *http.Request, tx pgx.Tx, v *view) error {
	id, err := parseTaskID(r)
	if err != nil {
		return err
	}
	t, err := tasks.Get(ctx, tx, id)
	if err != nil {
		return err
	}
	p := &taskPage{T: t, Inbox: decodeMessages(t.Inbox), InboxNext: decodeMessages(t.InboxNext)}
	if p.Children, p.ChildCounts, err = childList(ctx, tx, id, maxChildren); err != nil {
		return err
	}
	for s, n := range p.ChildCounts {
		p.Total += n
		if tasks.Status(s).Ended() {
			p.Ended += n
		}
	}
	history, err := tasks.History(ctx, tx, id, tasks.HistoryOptions{Last: maxHistory})
	if err != nil {
		return err
	}
	ids := []tasks.ID{t.ClaimedBy}
	for _, h := range history {
		ids = append(ids, h.Executor)
	}
	execs, err := executorsByID(ctx, tx, ids)
	if err != nil {
		return err
	}
	if e, ok := execs[t.ClaimedBy]; ok && !t.ClaimedBy.IsZero() {
		p.Holder = &e
	}
	for i := len(history) - 1; i >= 0; i-- {
		h := historyEntry{HistoryEntry: history[i]}
		if e, ok := execs[h.Executor]; ok {
			h.Host = fmt.Sprintf("%s pid %d", e.Host, e.PID)
		}
		if h.ClaimedAt != nil {
			h.Took = h.FinishedAt.Sub(*h.ClaimedAt)
		}
		if len(h.Message) > 0 {
			h.Dropped = prettyJSON(h.Message)
		}
		p.History = append(p.History, h)
	}
	v.Title, v.P = string(t.Type)+" "+id.String()+" · corotask", p
	return nil
}

// treePage is the tree page's data.
type treePage struct {
	Root  *treeNode
	Count int
	Cut   bool
}

// maxTreeNodes is the most tasks the tree page shows.
const maxTreeNodes = 1000

func loadTree(ctx context.Context, h *Handler, r *http.Request, tx pgx.Tx, v *view) error {
	id, err := parseTaskID(r)
	if err != nil {
		return err
	}
	root, n, cut, err := loadTreeNodes(ctx, tx, id, maxTreeNodes)
	if err != nil {
		return err
	}
	if root == nil {
		return fmt.Errorf("%w: %s", tasks.ErrNotFound, id)
	}
	v.Title, v.P = "Tree of "+id.String()+" · corotask", &treePage{Root: root, Count: n, Cut: cut}
	return nil
}

// executorsPage is the executors page's data.
type executorsPage struct {
	Live, Gone []tasks.Executor
	// Unserved are the types of ready tasks that no live executor serves.
	Unserved []string
}

func loadExecutors(ctx context.Context, h *Handler, r *http.Request, tx pgx.Tx, v *view) error {
	execs, err := tasks.Executors(ctx, tx)
	if err != nil {
		return err
	}
	p := &executorsPage{}
	for _, e := range execs {
		if e.Stale || e.StoppedAt != nil {
			p.Gone = append(p.Gone, e)
		} else {
			p.Live = append(p.Live, e)
		}
	}
	slices.Reverse(p.Gone) // the latest first
	if p.Unserved, err = unservedTypes(ctx, tx); err != nil {
		return err
	}
	v.Title, v.P = "Executors · corotask", p
	return nil
}
