package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/corotask/corotask/internal/database"
	"github.com/corotask/corotask/internal/humantime"
	"github.com/corotask/corotask/internal/query"
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
		return humantime.Relative(&t, v.Now)
	case *time.Time:
		return humantime.Relative(t, v.Now)
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
	return humantime.Duration(d)
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
		"/limits":          {name: "limits", nav: "limits", load: loadLimits},
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
	case errors.Is(err, tasks.ErrNoMessage), errors.Is(err, tasks.ErrUnknownType):
		return http.StatusBadRequest, sentinelText(err)
	case errors.Is(err, tasks.ErrPaused), errors.Is(err, tasks.ErrNotPaused):
		return http.StatusConflict, sentinelText(err)
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
		for _, s := range []error{tasks.ErrNotFound, tasks.ErrEnded, tasks.ErrTooLarge, tasks.ErrRunning, tasks.ErrWrongStatus, tasks.ErrNoMessage,
			tasks.ErrPaused, tasks.ErrNotPaused, tasks.ErrUnknownType} {
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
		if err := tx.QueryRow(ctx, query.Now).Scan(&v.Now); err != nil {
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
	q = cloneValues(q)
	q.Del("done")
	return q.Encode()
}

// cloneValues returns a copy of q.
func cloneValues(q url.Values) url.Values {
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
		"send":      "Message sent.",
		"cancel":    "Task canceled.",
		"retry":     "Task woken for a retry now.",
		"restart":   "Task restarted.",
		"drop":      "Message dropped (the task's history keeps it).",
		"set-state": "State set (the task's history keeps the one it replaced).",
		"pause":     "Type paused: executors claim none of its tasks until it is resumed.",
		"resume":    "Type resumed.",
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
