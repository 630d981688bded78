package ui

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/corotask/corotask/tasks"
)

// typeAction is an operator action on a task type, posted from a form on
// the Limits page or the overview's rows of types. Like a task's actions
// (serveAction), it is checked, confirmed, then done, and the browser is
// sent back to the page it was posted from.
type typeAction struct {
	name string // the path below /types/, and the form's "done" message
	// check reads the type's controls and says on the confirmation page
	// what will be done, or why it cannot be.
	check func(ctx context.Context, h *Handler, typ tasks.Type) (string, error)
	// do acts.
	do func(ctx context.Context, h *Handler, typ tasks.Type) error
}

// typeActions lists the actions on types.
func (h *Handler) typeActions() []typeAction {
	return []typeAction{
		{name: "pause", check: checkPause, do: func(ctx context.Context, h *Handler, typ tasks.Type) error {
			return tasks.Pause(ctx, h.cfg.Pool, typ)
		}},
		{name: "resume", check: checkResume, do: func(ctx context.Context, h *Handler, typ tasks.Type) error {
			return tasks.Resume(ctx, h.cfg.Pool, typ)
		}},
	}
}

// pausedText says since when and by whom a type is paused.
func pausedText(at *time.Time, by string) string {
	s := "since " + at.UTC().Format("2006-01-02 15:04:05Z")
	if by != "" {
		s += " by " + by
	}
	return s
}

func checkPause(ctx context.Context, h *Handler, typ tasks.Type) (string, error) {
	f, err := readTypeFlow(ctx, h.cfg.Pool, typ)
	if err != nil {
		return "", err
	}
	if f.PausedAt != nil {
		return "", &pageError{http.StatusConflict, fmt.Sprintf("type %s is paused already, %s", typ, pausedText(f.PausedAt, f.PausedBy))}
	}
	return fmt.Sprintf("Pause type %s? No executor claims its tasks until it is resumed; polls running now finish. "+
		"Its ready tasks show as paused.", typ), nil
}

func checkResume(ctx context.Context, h *Handler, typ tasks.Type) (string, error) {
	f, err := readTypeFlow(ctx, h.cfg.Pool, typ)
	if err != nil {
		return "", err
	}
	if f.PausedAt == nil {
		return "", &pageError{http.StatusConflict, fmt.Sprintf("type %s is not paused", typ)}
	}
	return fmt.Sprintf("Resume type %s, paused %s? Executors claim its tasks again, within its limits.",
		typ, pausedText(f.PausedAt, f.PausedBy)), nil
}

// typeBack are the pages a type's action may send the browser back to, by
// the name its form gives.
var typeBack = map[string]string{"limits": "/limits", "overview": "/"}

// serveTypeAction serves the POST of a type action's form: type names the
// type, back the page to return to (limits or overview).
func (h *Handler) serveTypeAction(a typeAction) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		routes := h.pageRoutes()
		back := "limits"
		if !h.acceptForm(w, r, h.newView(routes[typeBack[back]])) {
			return
		}
		if b := r.PostFormValue("back"); typeBack[b] != "" {
			back = b
		}
		backPath := typeBack[back]
		backRoute := routes[backPath]
		if backPath == "/" {
			backRoute = routes["/{$}"]
		}
		ctx := r.Context()
		// refuse shows the page the form was posted from again, with the
		// refusal.
		refuse := func(err error) {
			status, msg := h.errorStatus(err)
			v := h.newView(backRoute)
			if err := h.read(ctx, backRoute, r, v); err != nil {
				status, v.Error = h.errorStatus(err)
				h.write(w, status, "error", v)
				return
			}
			v.Error = msg
			v.Live = h.cfg.Prefix + "/live" + backPath
			h.write(w, status, backRoute.name, v)
		}
		typ := tasks.Type(r.PostFormValue("type"))
		if err := typ.Validate(); err != nil {
			refuse(badRequest("type: %v", err))
			return
		}
		question, err := a.check(ctx, h, typ)
		if err != nil {
			refuse(err)
			return
		}
		if r.PostFormValue("confirm") != "yes" {
			v := h.newView(backRoute)
			v.Title = "Confirm · corotask"
			v.P = &confirmation{Action: a.name, Post: h.cfg.Prefix + "/types/" + a.name, Back: h.cfg.Prefix + backPath,
				BackText: "No, back", Question: question, Fields: map[string]string{"type": string(typ), "back": back}}
			h.write(w, http.StatusOK, "confirm", v)
			return
		}
		if err := a.do(ctx, h, typ); err != nil {
			refuse(err)
			return
		}
		h.cfg.Logger.Info("ui: action", "action", a.name, "type", typ)
		http.Redirect(w, r, h.cfg.Prefix+backPath+"?done="+a.name, http.StatusSeeOther)
	}
}
