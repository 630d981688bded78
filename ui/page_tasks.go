package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

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
	q := cloneValues(l.Form)
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
	if s := q.Get("key"); s != "" {
		if err := tasks.ValidateKey(s); err != nil {
			return l, badRequest("key: %v", err)
		}
		l.Key = s
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
	l := &taskList{Form: cloneValues(form), Prefix: h.cfg.Prefix}
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
		q := cloneValues(l.Form)
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
