package ui_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
	"github.com/corotask/corotask/ui"
)

var wasRE = regexp.MustCompile(`name="was" value="([^"]*)"`)

// stateForm reads, from a task's page, the state the set-state form names
// as the one it replaces, and the text its textarea holds.
func (s *server) stateForm(id tasks.ID) (was, text string) {
	s.t.Helper()
	_, body := s.get("/tasks/" + id.String())
	m := wasRE.FindStringSubmatch(body)
	require.NotNil(s.t, m, "no set-state form on the task page")
	t := regexp.MustCompile(`(?s)<textarea id="state-body"[^>]*>(.*?)</textarea>`).FindStringSubmatch(body)
	require.NotNil(s.t, t)
	return html.UnescapeString(m[1]), html.UnescapeString(t[1])
}

func TestSetState(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	id := s.create(tasks.Spec{Type: "w", State: map[string]any{"step": 3, "note": "<b>&"}})
	was, text := s.stateForm(id)
	require.Equal(t, string(s.task(id).State), was)
	require.Equal(t, "{\n  \"note\": \"<b>&\",\n  \"step\": 3\n}", text, "the form holds the state, indented")

	form := url.Values{"csrf": {s.token(id)}, "was": {was}, "state": {`{"step": 4, "note": "fixed"}`}}
	resp, body := s.post("/tasks/"+id.String()+"/set-state", form)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Set the state of task "+id.String()+" (w)?")
	require.Contains(t, body, "Now:\n"+html.EscapeString(text)+"\n\nAfter:\n{\n  &#34;step&#34;: 4,\n  &#34;note&#34;: &#34;fixed&#34;\n}")
	require.Contains(t, body, `name="was" value="`+html.EscapeString(was)+`"`, "the confirmation posts the form again")
	require.JSONEq(t, `{"step": 3, "note": "<b>&"}`, string(s.task(id).State), "nothing before the confirmation")

	resp, body = s.confirmed(id, "set-state", url.Values{"was": {was}, "state": {`{"step": 4, "note": "fixed"}`}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/tasks/"+id.String()+"?done=set-state", resp.Header.Get("Location"))
	require.JSONEq(t, `{"step": 4, "note": "fixed"}`, string(s.task(id).State))
	h := s.history(id)
	last := h[len(h)-1]
	require.Equal(t, "set_state", last.Action)
	require.JSONEq(t, `{"step": 3, "note": "<b>&"}`, string(last.StateBefore))
	require.JSONEq(t, `{"step": 4, "note": "fixed"}`, string(last.State))

	_, body = s.get("/tasks/" + id.String() + "?done=set-state")
	require.Contains(t, body, "State set (the task&#39;s history keeps the one it replaced).")
	require.Contains(t, body, "operator · set_state")
	require.Contains(t, body, "the state set</div><pre>{\n  &#34;note&#34;: &#34;fixed&#34;,\n  &#34;step&#34;: 4\n}</pre>")
	require.Contains(t, body, "the state replaced</div><pre>{\n  &#34;note&#34;: &#34;&lt;b&gt;&amp;&#34;,\n  &#34;step&#34;: 3\n}</pre>")

	// The same form again: the state it was filled from is no longer the
	// task's, which is not overwritten.
	for _, confirm := range []string{"", "yes"} {
		resp, body = s.post("/tasks/"+id.String()+"/set-state", url.Values{"csrf": {s.token(id)}, "was": {was},
			"state": {`{"step": 5}`}, "confirm": {confirm}})
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		require.Contains(t, body, "the state of task "+id.String()+" changed since the page was read")
	}
	require.JSONEq(t, `{"step": 4, "note": "fixed"}`, string(s.task(id).State))
	require.Len(t, s.history(id), len(h))
}

// A state that is not JSON is refused, and the page keeps what was typed.
func TestSetStateRefusesWhatIsNotJSON(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	id := s.create(tasks.Spec{Type: "w"})
	was, text := s.stateForm(id)
	require.Empty(t, was, "the task has no state")
	require.Equal(t, "null", text)
	for state, want := range map[string]string{
		"":             "the state is empty",
		"  ":           "the state is empty",
		`{"step": 4`:   "the state is not valid JSON: unexpected end of JSON input",
		`{"a": 1} {}`:  "the state is not valid JSON: invalid character &#39;{&#39; after top-level value",
		"\"\xff\"":     "the state is not valid JSON: not UTF-8",
		`{step: 4}`:    "the state is not valid JSON: invalid character &#39;s&#39;",
		`[1, 2,]`:      "the state is not valid JSON",
		`"unfinished`:  "the state is not valid JSON",
		`{"a": 1}}`:    "the state is not valid JSON",
		`{"a": 1, "b"`: "the state is not valid JSON",
	} {
		resp, body := s.confirmed(id, "set-state", url.Values{"was": {was}, "state": {state}})
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, state)
		require.Contains(t, body, want, state)
		require.Contains(t, body, `role="alert"`, state)
	}
	resp, body := s.confirmed(id, "set-state", url.Values{"was": {was}, "state": {`{"step": 4`}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, `spellcheck="false">{&#34;step&#34;: 4</textarea>`, "the refused state stays in the form")
	require.Nil(t, s.task(id).State)
	require.Empty(t, s.history(id))

	// JSON null is a state: the poller's zero value.
	resp, body = s.confirmed(id, "set-state", url.Values{"was": {was}, "state": {"null"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "null", string(s.task(id).State))
	_, body = s.get("/tasks/" + id.String())
	require.Contains(t, body, "the state replaced</div><pre>none (the poller's zero value)</pre>")
}

// A task an executor holds, or that has ended, keeps its state.
func TestSetStateOfARunningOrEndedTask(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	id := s.create(tasks.Spec{Type: "w", State: 1})
	was, _ := s.stateForm(id)
	token := s.token(id)
	s.hold(id)
	for _, confirm := range []string{"", "yes"} {
		resp, body := s.post("/tasks/"+id.String()+"/set-state", url.Values{"csrf": {token}, "was": {was},
			"state": {"2"}, "confirm": {confirm}})
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		require.Contains(t, body, "task is running: "+id.String()+": an executor holds it")
	}
	require.JSONEq(t, `1`, string(s.task(id).State))

	ended := s.create(tasks.Spec{Type: "w", State: 1})
	was, _ = s.stateForm(ended)
	s.fail(ended)
	_, body := s.get("/tasks/" + ended.String())
	require.NotContains(t, body, `/set-state"`, "no set-state form on an ended task")
	resp, body := s.confirmed(ended, "set-state", url.Values{"was": {was}, "state": {"2"}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "task has ended")
	require.JSONEq(t, `1`, string(s.task(ended).State))
}
