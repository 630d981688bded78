package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
	"github.com/corotask/corotask/ui"
)

// confirmed posts an action's form with its confirmation.
func (s *server) confirmed(id tasks.ID, action string, form url.Values) (*http.Response, string) {
	s.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", s.token(id))
	form.Set("confirm", "yes")
	return s.post("/tasks/"+id.String()+"/"+action, form)
}

// hold makes the task look claimed by an executor that is polling it.
func (s *server) hold(id tasks.ID) {
	s.t.Helper()
	_, err := s.pool.Exec(context.Background(), `UPDATE corotask.tasks SET claim = gen_random_uuid(),
		heartbeat = now(), claim_expires_at = now() + interval '1 hour', claimed_at = now() WHERE task_id = $1`, id)
	require.NoError(s.t, err)
}

// fail ends the task as failed.
func (s *server) fail(id tasks.ID) {
	s.t.Helper()
	_, err := s.pool.Exec(context.Background(), `UPDATE corotask.tasks SET done_at = now(), outcome = 'failed',
		wake_at = NULL, failures = 3, last_error = 'boom' WHERE task_id = $1`, id)
	require.NoError(s.t, err)
}

// history returns the task's history.
func (s *server) history(id tasks.ID) []tasks.HistoryEntry {
	s.t.Helper()
	h, err := tasks.History(context.Background(), s.pool, id, tasks.HistoryOptions{})
	require.NoError(s.t, err)
	return h
}

func TestTaskPageShowsTheHistory(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	ctx := context.Background()
	e := executor.MustNew(s.pool, executor.Config{Logger: testdb.Logger(t)})
	polls := 0
	executor.Register(e, "flaky", executor.PollerFunc[struct{}, json.RawMessage](
		func(ctx context.Context, tk *executor.Task[struct{}, json.RawMessage]) (executor.Action, error) {
			polls++
			switch polls {
			case 1:
				return executor.Action{}, errors.New("card declined by the bank")
			case 2:
				var m map[string]int
				m["boom"] = 1 // panics
			}
			return executor.Sleep(3600e9), nil
		}))
	id := s.create(tasks.Spec{Type: "flaky"})
	for range 3 {
		_, err := tasks.Get(ctx, s.pool, id)
		require.NoError(t, err)
		require.NoError(t, s.retryNow(id))
		_, _ = e.PollOnce(ctx) // returns the poll's error, if any

	}
	status, body := s.get("/tasks/" + id.String())
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "card declined by the bank")
	require.Contains(t, body, `o-panicked`)
	require.Contains(t, body, "<summary>stack</summary>")
	require.Contains(t, body, `o-committed">committed · sleep`)
	require.Contains(t, body, "poller panicked: assignment to entry in nil map</pre>", "the stack is apart")
}

// retryNow makes the task ready, as the executor's backoff would later.
func (s *server) retryNow(id tasks.ID) error {
	_, err := s.pool.Exec(context.Background(), `UPDATE corotask.tasks SET wake_at = now() WHERE task_id = $1 AND done_at IS NULL`, id)
	return err
}

func TestExecutorsPageAndHolder(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	ctx, stop := context.WithCancel(context.Background())
	e := executor.MustNew(s.pool, executor.Config{Concurrency: 7, Logger: testdb.Logger(t)})
	polling := make(chan struct{})
	release := make(chan struct{})
	executor.Register(e, "held", executor.PollerFunc[struct{}, json.RawMessage](
		func(ctx context.Context, tk *executor.Task[struct{}, json.RawMessage]) (executor.Action, error) {
			close(polling)
			<-release
			return executor.Done(), nil
		}))
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	id := s.create(tasks.Spec{Type: "held"})
	orphan := s.create(tasks.Spec{Type: "nobody.serves.this"})
	<-polling

	status, body := s.get("/executors")
	require.Equal(t, http.StatusOK, status, body)
	host, _ := os.Hostname()
	require.Contains(t, body, host)
	require.Contains(t, body, strconv.Itoa(os.Getpid()))
	require.Contains(t, body, `href="/tasks?type=held"`)
	require.Contains(t, body, `<progress value="1" max="7"`)
	require.Contains(t, body, `s-running">live`)
	require.Contains(t, body, "no live executor serves: <a href=\"/tasks?type=nobody.serves.this&amp;status=unserved\">")
	_, body = s.get("/")
	require.Contains(t, body, "1 live executor</a>, holding 1 of 7 slots")

	_, body = s.get("/tasks/" + id.String())
	require.Contains(t, body, "Held by")
	require.Contains(t, body, host+" pid "+strconv.Itoa(os.Getpid()))
	_, body = s.get("/tasks/" + orphan.String())
	require.Contains(t, body, `s-unserved">unserved`)

	close(release)
	_, err := tasks.Wait(context.Background(), s.pool, id)
	require.NoError(t, err)
	stop()
	require.NoError(t, <-done)
	_, body = s.get("/executors")
	require.Contains(t, body, "Live <small>0</small>")
	require.Contains(t, body, "stopped")
}

func TestRetryNow(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	id := s.create(tasks.Spec{Type: "w"})
	_, err := s.pool.Exec(context.Background(), `UPDATE corotask.tasks SET failures = 2, last_error = 'boom',
		wake_at = now() + interval '1 hour' WHERE task_id = $1`, id)
	require.NoError(t, err)
	_, body := s.get("/tasks/" + id.String())
	require.Contains(t, body, `/retry"`, "a retrying task offers a retry")

	resp, body := s.post("/tasks/"+id.String()+"/retry", url.Values{"csrf": {s.token(id)}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Poll task "+id.String())
	require.Equal(t, tasks.StatusRetrying, s.task(id).Status, "nothing before the confirmation")

	resp, body = s.confirmed(id, "retry", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, tasks.StatusReady, s.task(id).Status)
	h := s.history(id)
	require.Equal(t, tasks.OperatorAction, h[len(h)-1].Outcome)
	require.Equal(t, "retry", h[len(h)-1].Action)

	// A ready task has nothing to retry: the refusal says why, and nothing changes.
	resp, body = s.confirmed(id, "retry", nil)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "ready")
	require.Contains(t, body, `role="alert"`)
	require.Len(t, s.history(id), len(h))
}

func TestRestart(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	id := s.create(tasks.Spec{Type: "w", State: map[string]int{"step": 3}})
	live := s.create(tasks.Spec{Type: "w"})
	s.fail(id)
	_, body := s.get("/tasks/" + id.String())
	require.Contains(t, body, `/restart"`, "a failed task offers a restart")

	resp, body := s.confirmed(id, "restart", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	tk := s.task(id)
	require.Equal(t, tasks.StatusReady, tk.Status)
	require.JSONEq(t, `{"step": 3}`, string(tk.State))
	require.Zero(t, tk.Failures)
	h := s.history(id)
	require.Equal(t, "restart", h[len(h)-1].Action)

	resp, body = s.confirmed(live, "restart", nil)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "it is ready: only a failed task can be restarted")
	require.Equal(t, tasks.StatusReady, s.task(live).Status)
}

var digestRE = regexp.MustCompile(`name="message" value="([0-9a-f]+)"`)

// digests reads, from a task's page, the digests the drop forms name the
// inbox's messages by, in order.
func (s *server) digests(id tasks.ID) []string {
	s.t.Helper()
	_, body := s.get("/tasks/" + id.String())
	var out []string
	for _, m := range digestRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestDropMessage(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	ctx := context.Background()
	id := s.create(tasks.Spec{Type: "w"})
	require.NoError(t, inbox.Send(ctx, s.pool, id, tasks.ID{}, map[string]string{"poison": "pill"}))
	require.NoError(t, inbox.Send(ctx, s.pool, id, tasks.ID{}, map[string]string{"good": "one"}))
	_, body := s.get("/tasks/" + id.String())
	require.Contains(t, body, `name="position" value="1"`)
	require.Contains(t, body, `name="position" value="2"`)
	digests := s.digests(id)
	require.Len(t, digests, 2)

	resp, body := s.post("/tasks/"+id.String()+"/drop", url.Values{"csrf": {s.token(id)}, "position": {"1"}, "message": {digests[0]}})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Drop message 1 of task "+id.String())
	require.Contains(t, body, "pill")
	require.Equal(t, 2, s.task(id).InboxLen)

	resp, body = s.confirmed(id, "drop", url.Values{"position": {"1"}, "message": {digests[0]}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	tk := s.task(id)
	require.Len(t, tk.Inbox, 1)
	require.Contains(t, string(tk.Inbox[0]), "good")
	h := s.history(id)
	require.Equal(t, "drop_message", h[len(h)-1].Action)
	_, body = s.get("/tasks/" + id.String())
	require.Contains(t, body, "the dropped message")

	// The same form again: position 1 now holds another message, which is
	// not dropped.
	for _, confirm := range []string{"", "yes"} {
		resp, body = s.post("/tasks/"+id.String()+"/drop", url.Values{"csrf": {s.token(id)}, "position": {"1"},
			"message": {digests[0]}, "confirm": {confirm}})
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		require.Contains(t, body, "message 1 of task "+id.String()+" is no longer the one shown")
	}
	require.Equal(t, 1, s.task(id).InboxLen)

	for pos, want := range map[string]string{
		"5":   "the inbox holds 1",
		"0":   "is not a position in the inbox",
		"x":   "is not a position in the inbox",
		"":    "is not a position in the inbox",
		"-1":  "is not a position in the inbox",
		"1.5": "is not a position in the inbox",
	} {
		resp, body := s.confirmed(id, "drop", url.Values{"position": {pos}, "message": {digests[1]}})
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, pos)
		require.Contains(t, body, want, pos)
	}
	require.Equal(t, 1, s.task(id).InboxLen)
}

func TestActionsOnARunningTaskAreRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	ctx := context.Background()
	id := s.create(tasks.Spec{Type: "w"})
	require.NoError(t, inbox.Send(ctx, s.pool, id, tasks.ID{}, 1))
	token := s.token(id)
	digests := s.digests(id)
	s.hold(id)
	_, body := s.get("/tasks/" + id.String())
	require.NotContains(t, body, `name="position"`, "no drop while a poll runs")
	for action, form := range map[string]url.Values{
		"retry": {}, "drop": {"position": {"1"}, "message": {digests[0]}},
		"set-state": {"state": {"1"}},
	} {
		form.Set("csrf", token)
		form.Set("confirm", "yes")
		resp, body := s.post("/tasks/"+id.String()+"/"+action, form)
		require.Equal(t, http.StatusConflict, resp.StatusCode, action)
		require.Contains(t, body, "task is running", action)
	}
	require.Equal(t, 1, s.task(id).InboxLen)
}

func TestReadOnlyRefusesEveryAction(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{ReadOnly: true})
	id := s.create(tasks.Spec{Type: "w"})
	require.NoError(t, inbox.Send(context.Background(), s.pool, id, tasks.ID{}, 1))
	_, body := s.get("/tasks/" + id.String())
	require.NotContains(t, body, `method="post"`)
	for _, a := range []string{"send", "cancel", "retry", "restart", "drop", "set-state"} {
		resp, body := s.post("/tasks/"+id.String()+"/"+a, url.Values{"body": {"1"}, "position": {"1"}, "state": {"1"}, "confirm": {"yes"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, a)
		require.Contains(t, body, "read-only", a)
	}
	require.Equal(t, 1, s.task(id).InboxLen)
	require.Empty(t, s.history(id))
}
