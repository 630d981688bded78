package ui

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
	"github.com/jackc/pgx/v5"
)

// maxFormBytes bounds the body of an action's form: a message of
// tasks.MaxMessageBytes, and room for the rest.
const maxFormBytes = tasks.MaxMessageBytes + 64<<10

// action is an operator action on a task, posted from a form on its page.
type action struct {
	name string // the path below /tasks/{id}/, and the form's "done" message
	// check reads and checks the form before anything is asked or done; it
	// returns what the confirmation page says will be done.
	check func(r *http.Request, t *tasks.Task) (string, error)
	// do acts.
	do func(ctx context.Context, h *Handler, r *http.Request, id tasks.ID) error
}

// actions lists the actions the task page offers.
func (h *Handler) actions() []action {
	return []action{
		{name: "send", check: checkSend, do: doSend},
		{name: "cancel", check: func(r *http.Request, t *tasks.Task) (string, error) {
			return fmt.Sprintf("Cancel task %s (%s) and all its live descendants?", t.ID, t.Type), nil
		}, do: func(ctx context.Context, h *Handler, r *http.Request, id tasks.ID) error {
			return tasks.Cancel(ctx, h.cfg.Pool, id)
		}},
		{name: "retry", check: func(r *http.Request, t *tasks.Task) (string, error) {
			return fmt.Sprintf("Poll task %s (%s) now, instead of %s? Its failures (%d) are kept.",
				t.ID, t.Type, whenText(t), t.Failures), nil
		}, do: func(ctx context.Context, h *Handler, r *http.Request, id tasks.ID) error {
			return tasks.Retry(ctx, h.cfg.Pool, id)
		}},
		{name: "restart", check: func(r *http.Request, t *tasks.Task) (string, error) {
			return fmt.Sprintf("Restart failed task %s (%s)? It will be ready at once, with its last committed state, "+
				"its inbox and no failures; its parent will be told again when it ends.", t.ID, t.Type), nil
		}, do: func(ctx context.Context, h *Handler, r *http.Request, id tasks.ID) error {
			return tasks.Restart(ctx, h.cfg.Pool, id)
		}},
		{name: "set-state", check: checkSetState, do: doSetState},
		{name: "drop", check: checkDrop, do: func(ctx context.Context, h *Handler, r *http.Request, id tasks.ID) error {
			// The position is checked again against the message the form
			// named: a poll may have taken messages since the page was read.
			// The row is locked from that check to the drop, so that no
			// commit moves another message into the position between them.
			return checkedUnderLock(ctx, h, r, id, checkDrop, func(tx pgx.Tx) error {
				pos, _ := dropPosition(r)
				_, err := tasks.DropMessage(ctx, tx, id, pos, r.PostFormValue("message"))
				return err
			})
		}},
	}
}

// whenText says when a task would be polled, for the retry question.
func whenText(t *tasks.Task) string {
	if t.WakeAt == nil {
		return "when a message arrives"
	}
	return "at " + t.WakeAt.UTC().Format("2006-01-02 15:04:05Z")
}

// dropPosition reads the position (1: the oldest) of the message to drop.
func dropPosition(r *http.Request) (int, error) {
	s := r.PostFormValue("position")
	pos, err := strconv.Atoi(s)
	if err != nil || pos < 1 {
		return 0, badRequest("the message to drop: %q is not a position in the inbox (1 is the oldest)", s)
	}
	return pos, nil
}

func checkDrop(r *http.Request, t *tasks.Task) (string, error) {
	pos, err := dropPosition(r)
	if err != nil {
		return "", err
	}
	if pos > len(t.Inbox) {
		return "", fmt.Errorf("drop message %d of task %s: %w: the inbox holds %d", pos, t.ID, tasks.ErrNoMessage, len(t.Inbox))
	}
	m := decodeMessages(t.Inbox[pos-1 : pos])[0]
	if want := r.PostFormValue("message"); want != m.Digest {
		return "", &pageError{http.StatusConflict, fmt.Sprintf(
			"message %d of task %s is no longer the one shown: the inbox changed since the page was read; look again", pos, t.ID)}
	}
	from := "from outside"
	if !m.From.IsZero() {
		from = "from " + m.From.String()
	}
	return fmt.Sprintf("Drop message %d of task %s (%s), %s? No poll will see it; the task's history keeps it.\n\n%s",
		pos, t.ID, t.Type, from, m.Body), nil
}

// stateBody returns the state of the set-state form, checked to be JSON.
func stateBody(r *http.Request) (json.RawMessage, error) {
	return formJSON(r, "state", "state", "null for the poller's zero value")
}

// checkSetState checks the set-state form against the task: the form names
// the state it was filled from (was, as stored), so that a state a poll
// committed since the page was read is not overwritten unseen.
func checkSetState(r *http.Request, t *tasks.Task) (string, error) {
	state, err := stateBody(r)
	if err != nil {
		return "", err
	}
	switch {
	case t.Status.Ended():
		return "", fmt.Errorf("set state of %s: %w: %s (%s)", t.ID, tasks.ErrEnded, t.ID, t.Status)
	case t.Status == tasks.StatusRunning || t.Status == tasks.StatusStale:
		return "", fmt.Errorf("set state of %s: %w: %s: an executor holds it: try again once its poll has ended",
			t.ID, tasks.ErrRunning, t.ID)
	}
	if r.PostFormValue("was") != string(t.State) {
		return "", &pageError{http.StatusConflict, fmt.Sprintf(
			"the state of task %s changed since the page was read (a poll committed another); look again: nothing was set", t.ID)}
	}
	was := prettyJSON(t.State)
	if was == "" {
		was = "none (the poller's zero value)"
	}
	question := fmt.Sprintf("Set the state of task %s (%s)? Its next poll starts from the new state; when it is polled "+
		"is unchanged. The task's history keeps the state replaced.\n\nNow:\n%s\n\nAfter:\n%s", t.ID, t.Type, was, prettyJSON(state))
	if jsonEqual(t.State, state) {
		question += "\n\n(the same state)"
	}
	return question, nil
}

// jsonEqual says whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// doSetState checks the form again under the lock of the task's row, as
// the drop does: a poll may have committed another state since the
// confirmation.
func doSetState(ctx context.Context, h *Handler, r *http.Request, id tasks.ID) error {
	return checkedUnderLock(ctx, h, r, id, checkSetState, func(tx pgx.Tx) error {
		state, _ := stateBody(r)
		return tasks.SetState(ctx, tx, id, state)
	})
}

// checkedUnderLock locks the task's row, checks the form again (check)
// against the task as it is then, and acts (act) in the same transaction,
// so that no commit changes what was checked before the action.
func checkedUnderLock(ctx context.Context, h *Handler, r *http.Request, id tasks.ID,
	check func(*http.Request, *tasks.Task) (string, error), act func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, h.cfg.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, query.TaskLock, id); err != nil {
			return err
		}
		t, err := tasks.Get(ctx, tx, id)
		if err != nil {
			return err
		}
		if _, err := check(r, t); err != nil {
			return err
		}
		return act(tx)
	})
}

// sendBody returns the message of the send form, checked to be JSON.
func sendBody(r *http.Request) (json.RawMessage, error) {
	return formJSON(r, "body", "message", "e.g. {\"approve\": true}")
}

// formJSON returns the form's field name, checked to be one JSON value;
// what names it in a refusal, and example says what to type instead of
// nothing.
func formJSON(r *http.Request, name, what, example string) (json.RawMessage, error) {
	v := strings.TrimSpace(r.PostFormValue(name))
	if v == "" {
		return nil, badRequest("the %s is empty: type a JSON value, %s", what, example)
	}
	if !json.Valid([]byte(v)) || !utf8.ValidString(v) {
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			return nil, badRequest("the %s is not valid JSON: %v", what, err)
		}
		// Unmarshal takes invalid UTF-8 in strings, which PostgreSQL refuses.
		return nil, badRequest("the %s is not valid JSON: not UTF-8", what)
	}
	return json.RawMessage(v), nil
}

func checkSend(r *http.Request, t *tasks.Task) (string, error) {
	body, err := sendBody(r)
	if err != nil {
		return "", err
	}
	if t.Status.Ended() {
		return "", fmt.Errorf("send message to %s: %w: %s (%s)", t.ID, tasks.ErrEnded, t.ID, t.Status)
	}
	return fmt.Sprintf("Send this message to task %s (%s)?\n\n%s", t.ID, t.Type, prettyJSON(body)), nil
}

func doSend(ctx context.Context, h *Handler, r *http.Request, id tasks.ID) error {
	body, err := sendBody(r)
	if err != nil {
		return err
	}
	// Recorded in the task's history, as the other actions are.
	return inbox.SendAsOperator(ctx, h.cfg.Pool, id, tasks.ID{}, body)
}

// confirmation is the confirmation page's data.
type confirmation struct {
	Action string
	// Post is where the form is posted again; Back the page its "no"
	// returns to, and BackText that link's text.
	Post, Back, BackText string
	Question             string
	Fields               map[string]string // the form's fields, posted again
}

// serveAction serves the POST of an action's form. The form is checked
// first (a refusal is shown on the task page, and nothing changes); then,
// unless the form says confirm=yes, a confirmation page posts it again with
// confirm=yes; then the action is done and the browser is sent back to the
// task page.
func (h *Handler) serveAction(a action) http.HandlerFunc {
	taskRoute := h.pageRoutes()["/tasks/{id}"]
	return func(w http.ResponseWriter, r *http.Request) {
		v := h.newView(taskRoute)
		if !h.acceptForm(w, r, v) {
			return
		}
		id, err := parseTaskID(r)
		if err != nil {
			status, msg := h.errorStatus(err)
			v.Error = msg
			h.write(w, status, "error", v)
			return
		}
		ctx := r.Context()
		// refuse shows the task page again, with the refusal and the form
		// as it was filled.
		refuse := func(err error) {
			status, msg := h.errorStatus(err)
			v := h.newView(taskRoute)
			if err := h.read(ctx, taskRoute, r, v); err != nil {
				status, v.Error = h.errorStatus(err)
				h.write(w, status, "error", v)
				return
			}
			v.Error = msg
			v.Live = h.cfg.Prefix + "/live/tasks/" + id.String()
			v.P.(*taskPage).SendBody = r.PostFormValue("body")
			v.P.(*taskPage).StateBody = r.PostFormValue("state")
			h.write(w, status, taskRoute.name, v)
		}
		t, err := tasks.Get(ctx, h.cfg.Pool, id)
		if err != nil {
			refuse(err)
			return
		}
		question, err := a.check(r, t)
		if err != nil {
			refuse(err)
			return
		}
		if r.PostFormValue("confirm") != "yes" {
			fields := make(map[string]string)
			for k := range r.PostForm {
				if k != "csrf" && k != "confirm" {
					fields[k] = r.PostFormValue(k)
				}
			}
			v.Title = "Confirm · corotask"
			task := h.cfg.Prefix + "/tasks/" + id.String()
			v.P = &confirmation{Action: a.name, Post: task + "/" + a.name, Back: task, BackText: "No, back to the task",
				Question: question, Fields: fields}
			h.write(w, http.StatusOK, "confirm", v)
			return
		}
		if err := a.do(ctx, h, r, id); err != nil {
			refuse(err)
			return
		}
		h.cfg.Logger.Info("ui: action", "action", a.name, "task", id)
		http.Redirect(w, r, h.cfg.Prefix+"/tasks/"+id.String()+"?done="+a.name, http.StatusSeeOther)
	}
}

// acceptForm reads the form of an action's POST, and says whether the
// action may go on: when the UI is read-only, the form cannot be read, or
// it does not come from a page of this handler (checkOrigin), it writes the
// refusal, on an error page of view v, and says no.
func (h *Handler) acceptForm(w http.ResponseWriter, r *http.Request, v *view) bool {
	status := http.StatusOK
	switch {
	case h.cfg.ReadOnly:
		status, v.Error = http.StatusForbidden, "This UI is read-only: actions are turned off."
	default:
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			status, v.Error = http.StatusBadRequest, "the form could not be read: "+err.Error()
		} else if err := h.checkOrigin(r); err != nil {
			status, v.Error = http.StatusForbidden, err.Error()
		}
	}
	if status == http.StatusOK {
		return true
	}
	h.write(w, status, "error", v)
	return false
}

// crossOrigin refuses requests that a browser made from another origin
// (Sec-Fetch-Site, else Origin against Host).
var crossOrigin = http.NewCrossOriginProtection()

// checkOrigin refuses a form that did not come from a page of this handler:
// one posted from another site, or without this process's token.
func (h *Handler) checkOrigin(r *http.Request) error {
	if err := crossOrigin.Check(r); err != nil {
		return errors.New("refused: the form was posted from another site")
	}
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(h.token)) != 1 {
		return errors.New("refused: the form's token is missing or stale (reload the page and try again)")
	}
	return nil
}
