package ui_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
	"github.com/corotask/corotask/ui"
)

// server is a UI on a fresh database.
type server struct {
	t    *testing.T
	pool *pgxpool.Pool
	srv  *httptest.Server
	h    *ui.Handler
}

func newServer(t *testing.T, cfg ui.Config) *server {
	t.Helper()
	if cfg.Pool == nil {
		cfg.Pool = testdb.New(t)
	}
	h, err := ui.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &server{t: t, pool: cfg.Pool, srv: srv, h: h}
}

// client does not follow redirects, so that tests see them.
var client = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       testdb.Patience,
}

// get returns the status and body of a page.
func (s *server) get(path string) (int, string) {
	s.t.Helper()
	resp, err := client.Get(s.srv.URL + path)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp.StatusCode, string(b)
}

// post posts a form as a browser on the UI's own page would (same origin).
func (s *server) post(path string, form url.Values) (*http.Response, string) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(s.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := client.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp, string(b)
}

var tokenRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// token reads the CSRF token from a task's page.
func (s *server) token(id tasks.ID) string {
	s.t.Helper()
	status, body := s.get("/tasks/" + id.String())
	require.Equal(s.t, http.StatusOK, status, body)
	m := tokenRE.FindStringSubmatch(body)
	require.NotNil(s.t, m, "no token on the task page")
	return m[1]
}

func (s *server) create(spec tasks.Spec) tasks.ID {
	s.t.Helper()
	id, err := tasks.Create(context.Background(), s.pool, spec)
	require.NoError(s.t, err)
	return id
}

func (s *server) task(id tasks.ID) *tasks.Task {
	s.t.Helper()
	tk, err := tasks.Get(context.Background(), s.pool, id)
	require.NoError(s.t, err)
	return tk
}

func TestNewRequiresPool(t *testing.T) {
	t.Parallel()
	_, err := ui.New(ui.Config{})
	require.ErrorContains(t, err, "Pool is required")
}

func TestPagesShowTasks(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	root := s.create(tasks.Spec{Type: "orders.checkout", State: map[string]any{"item": "a chair", "n": 2}, Message: map[string]any{"hello": "world"}})
	child := s.create(tasks.Spec{Type: "orders.pay", Parent: root})
	grandchild := s.create(tasks.Spec{Type: "orders.charge", Parent: child, WakeAt: time.Now().Add(time.Hour)})
	ended := s.create(tasks.Spec{Type: "orders.pay", Parent: root})
	require.NoError(t, tasks.Cancel(context.Background(), s.pool, ended))

	status, body := s.get("/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Tasks by type and status")
	require.Contains(t, body, `href="/tasks?type=orders.checkout"`)
	require.Contains(t, body, "orders.charge")

	status, body = s.get("/tasks")
	require.Equal(t, http.StatusOK, status, body)
	for _, id := range []tasks.ID{root, child, grandchild, ended} {
		require.Contains(t, body, id.String())
	}

	status, body = s.get("/tasks/" + root.String())
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "&#34;item&#34;: &#34;a chair&#34;", "state as indented JSON")
	require.Contains(t, body, "&#34;hello&#34;: &#34;world&#34;", "the inbox message")
	require.Contains(t, body, "1 of 2 ended", "fan-in progress")
	require.Contains(t, body, child.String())

	status, body = s.get("/tasks/" + root.String() + "/tree")
	require.Equal(t, http.StatusOK, status, body)
	for _, id := range []tasks.ID{root, child, grandchild, ended} {
		require.Contains(t, body, id.String())
	}
	require.Contains(t, body, "4 tasks")

	// The child's tree is only its subtree.
	_, body = s.get("/tasks/" + child.String() + "/tree")
	require.Contains(t, body, grandchild.String())
	require.NotContains(t, body, ended.String())

	status, body = s.get("/static/ui.js")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "EventSource")
}

func TestTasksFilters(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	ctx := context.Background()
	a := s.create(tasks.Spec{Type: "a"})
	b := s.create(tasks.Spec{Type: "b", WakeAt: time.Now().Add(time.Hour)})
	c := s.create(tasks.Spec{Type: "b"})
	require.NoError(t, tasks.Cancel(ctx, s.pool, c))
	d := s.create(tasks.Spec{Type: "d", Parent: b})
	_, err := s.pool.Exec(ctx, `UPDATE corotask.tasks SET failures = 2, last_error = 'boom' WHERE task_id = $1`, a)
	require.NoError(t, err)

	cases := []struct {
		query    string
		want     []tasks.ID
		notWant  []tasks.ID
		contains string
	}{
		{query: "type=b", want: []tasks.ID{b, c}, notWant: []tasks.ID{a, d}},
		{query: "status=ready", want: []tasks.ID{a, d}, notWant: []tasks.ID{b, c}},
		{query: "status=sleeping", want: []tasks.ID{b}, notWant: []tasks.ID{a, c, d}},
		{query: "status=canceled", want: []tasks.ID{c}, notWant: []tasks.ID{a, b, d}},
		{query: "parent=" + b.String(), want: []tasks.ID{d}, notWant: []tasks.ID{a, b, c}},
		{query: "failing=1", want: []tasks.ID{a}, notWant: []tasks.ID{b, c, d}, contains: "boom"},
		{query: "type=b&status=canceled", want: []tasks.ID{c}, notWant: []tasks.ID{a, b, d}},
		{query: "since=1h", want: []tasks.ID{a, b, c, d}},
		{query: "until=1h", notWant: []tasks.ID{a, b, c, d}},
		{query: "since=2000-01-01&until=2999-01-01", want: []tasks.ID{a, b, c, d}},
	}
	for _, tc := range cases {
		status, body := s.get("/tasks?" + tc.query)
		require.Equal(t, http.StatusOK, status, "%s: %s", tc.query, body)
		for _, id := range tc.want {
			require.Contains(t, body, id.String(), tc.query)
		}
		for _, id := range tc.notWant {
			require.NotContains(t, body, `>`+id.String()+`</a>`, tc.query)
		}
		require.Contains(t, body, tc.contains, tc.query)
	}
}

func TestTasksBadFilters(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	for query, want := range map[string]string{
		"status=bogus":  `invalid status &#34;bogus&#34;`,
		"parent=nope":   `parent: invalid task id &#34;nope&#34;`,
		"after=nope":    `after: invalid task id`,
		"since=someday": `since: &#34;someday&#34; is neither a duration`,
		"sort=sideways": `sort: &#34;sideways&#34; is not a sort order`,
		"limit=0":       `limit: &#34;0&#34; is not a number from 1 to 500`,
		"failing=maybe": `failing: &#34;maybe&#34;`,
	} {
		status, body := s.get("/tasks?" + query)
		require.Equal(t, http.StatusBadRequest, status, query)
		require.Contains(t, body, want, query)
	}
}

func TestKeysetPagination(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	specs := make([]tasks.Spec, 7)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "page"}
	}
	ids, err := tasks.CreateMany(context.Background(), s.pool, specs)
	require.NoError(t, err)

	for _, order := range []string{"oldest", "newest"} {
		var seen []string
		next := "/tasks?limit=3&sort=" + order
		for pages := 0; next != ""; pages++ {
			require.Less(t, pages, 4, "too many pages")
			status, body := s.get(next)
			require.Equal(t, http.StatusOK, status, body)
			seen = append(seen, regexp.MustCompile(`<td class="id"><a href="/tasks/([0-9A-Z]{26})"`).FindAllString(body, -1)...)
			next = ""
			if m := regexp.MustCompile(`<a href="([^"]+)" rel="next">`).FindStringSubmatch(body); m != nil {
				next = strings.ReplaceAll(m[1], "&amp;", "&")
				require.Contains(t, next, "after=")
			}
		}
		require.Len(t, seen, 7, order)
		for i, id := range ids {
			j := i
			if order == "newest" {
				j = len(ids) - 1 - i
			}
			require.Contains(t, seen[j], id.String(), "%s: position %d", order, j)
		}
	}
}

func TestCountsAreEstimatedAboveTheThreshold(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{CountThreshold: 1})
	ctx := context.Background()
	specs := make([]tasks.Spec, 50)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "many"}
	}
	ids, err := tasks.CreateMany(ctx, s.pool, specs)
	require.NoError(t, err)
	for _, id := range ids[:20] {
		require.NoError(t, tasks.Cancel(ctx, s.pool, id))
	}
	_, err = s.pool.Exec(ctx, "ANALYZE corotask.tasks")
	require.NoError(t, err)

	_, body := s.get("/")
	require.Contains(t, body, "estimated from a sample")
	// Ready tasks are counted exactly, through the claim's index.
	require.Contains(t, body, `status=ready">30</a>`)

	exact := newServer(t, ui.Config{Pool: s.pool})
	_, body = exact.get("/")
	require.NotContains(t, body, "estimated from a sample")
	require.Contains(t, body, `status=canceled">20</a>`)
}

func TestTaskUnknownOrMalformedID(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	missing := tasks.NewID()
	for _, path := range []string{"/tasks/" + missing.String(), "/tasks/" + missing.String() + "/tree"} {
		status, body := s.get(path)
		require.Equal(t, http.StatusNotFound, status, path)
		require.Contains(t, body, "task not found: "+missing.String(), path)
	}
	status, body := s.get("/tasks/not-an-id")
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, body, "invalid task id &#34;not-an-id&#34;")

	status, body = s.get("/goto?id=" + missing.UUID())
	require.Equal(t, http.StatusSeeOther, status, body)
	status, body = s.get("/goto?id=")
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "neither a task ID nor a key")
}

func TestSendAsksThenSends(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	id := s.create(tasks.Spec{Type: "approval.order"})
	form := url.Values{"csrf": {s.token(id)}, "body": {`{"approve": true}`}}

	resp, body := s.post("/tasks/"+id.String()+"/send", form)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Send this message to task "+id.String())
	require.Contains(t, body, `name="confirm" value="yes"`)
	require.Zero(t, s.task(id).InboxLen, "nothing is sent before the confirmation")
	require.Empty(t, s.history(id), "nor recorded")

	form.Set("confirm", "yes")
	resp, body = s.post("/tasks/"+id.String()+"/send", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/tasks/"+id.String()+"?done=send", resp.Header.Get("Location"))
	tk := s.task(id)
	require.Len(t, tk.Inbox, 1)
	require.Contains(t, string(tk.Inbox[0]), `"approve": true`)

	// The history records the send: who sent what.
	h := s.history(id)
	require.Len(t, h, 1)
	require.Equal(t, tasks.OperatorAction, h[0].Outcome)
	require.Equal(t, "send", h[0].Action)
	require.Equal(t, s.sessionUser(), h[0].Actor)
	require.Equal(t, string(tk.Inbox[0]), string(h[0].Message), "the envelope the task received")

	_, body = s.get("/tasks/" + id.String() + "?done=send")
	require.Contains(t, body, "Message sent.")
	require.Contains(t, body, `sent by an operator during or after attempt 0: no attempt of its own">#0.1</b>`)
	require.Contains(t, body, `o-operator">operator · send</span>`)
	require.Contains(t, body, "· by "+s.sessionUser())
	require.Contains(t, body, `<div class="sent">the message sent</div>`)
	require.Contains(t, body, "<pre>{\n  &#34;approve&#34;: true\n}</pre>")
}

// sessionUser is the database role the handler's pool logs in as, which
// the history records for its actions.
func (s *server) sessionUser() string {
	s.t.Helper()
	var role string
	require.NoError(s.t, s.pool.QueryRow(context.Background(), `SELECT session_user`).Scan(&role))
	return role
}

func TestSendRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	ctx := context.Background()
	id := s.create(tasks.Spec{Type: "approval.order"})
	ended := s.create(tasks.Spec{Type: "approval.order"})
	require.NoError(t, tasks.Cancel(ctx, s.pool, ended))
	token := s.token(id)

	cases := []struct {
		name   string
		to     string
		body   string
		status int
		want   string
	}{
		{"malformed JSON", id.String(), `{"approve": tru`, http.StatusBadRequest, "the message is not valid JSON"},
		{"empty message", id.String(), "  ", http.StatusBadRequest, "the message is empty"},
		{"ended task", ended.String(), `{"approve": true}`, http.StatusConflict, "task has ended: " + ended.String()},
		{"unknown task", tasks.NewID().String(), `{"approve": true}`, http.StatusNotFound, "task not found"},
		{"malformed ID", "nope", `{"approve": true}`, http.StatusNotFound, "invalid task id"},
	}
	for _, tc := range cases {
		for _, confirm := range []string{"", "yes"} {
			resp, body := s.post("/tasks/"+tc.to+"/send", url.Values{"csrf": {token}, "body": {tc.body}, "confirm": {confirm}})
			require.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.name, body)
			require.Contains(t, body, tc.want, tc.name)
			require.Contains(t, body, `role="alert"`, tc.name)
		}
	}
	require.Zero(t, s.task(id).InboxLen)
	require.Zero(t, s.task(ended).InboxLen)
	require.Empty(t, s.history(id), "a refused message is not recorded")
	require.Len(t, s.history(ended), 1, "the cancel alone")

	// The refused message stays in the form, to be fixed.
	_, body := s.post("/tasks/"+id.String()+"/send", url.Values{"csrf": {token}, "body": {`{"approve": tru`}})
	require.Contains(t, body, `{&#34;approve&#34;: tru</textarea>`)
}

func TestSendToATaskThatEndsWhileConfirming(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	id := s.create(tasks.Spec{Type: "approval.order"})
	token := s.token(id)
	require.NoError(t, tasks.Cancel(context.Background(), s.pool, id))
	resp, body := s.post("/tasks/"+id.String()+"/send", url.Values{"csrf": {token}, "body": {`1`}, "confirm": {"yes"}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "task has ended")
	require.Zero(t, s.task(id).InboxLen)
	require.Len(t, s.history(id), 1, "the cancel alone")
}

// A message goes to a running task too (into inbox_next), and is recorded.
func TestSendToARunningTaskIsRecorded(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	id := s.create(tasks.Spec{Type: "approval.order"})
	s.hold(id)
	form := url.Values{"csrf": {s.token(id)}, "body": {`"while it runs"`}, "confirm": {"yes"}}
	resp, body := s.post("/tasks/"+id.String()+"/send", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	tk := s.task(id)
	require.Equal(t, tasks.StatusRunning, tk.Status)
	require.Len(t, tk.InboxNext, 1)
	h := s.history(id)
	require.Len(t, h, 1)
	require.Equal(t, "send", h[0].Action)
	require.Equal(t, tk.Attempts, h[0].Attempt, "under the running attempt, which it does not raise")
	require.Equal(t, 1, h[0].Seq)
	require.Equal(t, string(tk.InboxNext[0]), string(h[0].Message))
}

func TestCancelAsksThenCancels(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	root := s.create(tasks.Spec{Type: "w"})
	child := s.create(tasks.Spec{Type: "w", Parent: root})
	form := url.Values{"csrf": {s.token(root)}}
	resp, body := s.post("/tasks/"+root.String()+"/cancel", form)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Cancel task "+root.String())
	require.Equal(t, tasks.StatusReady, s.task(root).Status)

	form.Set("confirm", "yes")
	resp, body = s.post("/tasks/"+root.String()+"/cancel", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, tasks.StatusCanceled, s.task(root).Status)
	require.Equal(t, tasks.StatusCanceled, s.task(child).Status)
	_, body = s.get("/tasks/" + root.String())
	require.NotContains(t, body, `/cancel"`, "an ended task offers no cancel")
	require.NotContains(t, body, `/send"`, "nor a message")

	resp, body = s.post("/tasks/"+root.String()+"/cancel", form)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "task has ended")
}

func TestActionsNeedTheTokenAndTheSameOrigin(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	id := s.create(tasks.Spec{Type: "w"})
	token := s.token(id)
	send := url.Values{"body": {`1`}, "confirm": {"yes"}}

	resp, body := s.post("/tasks/"+id.String()+"/send", send)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "token is missing or stale")

	send.Set("csrf", strings.Repeat("0", len(token)))
	resp, _ = s.post("/tasks/"+id.String()+"/send", send)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	// Another site's page posting a form with the right token.
	send.Set("csrf", token)
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/tasks/"+id.String()+"/send", strings.NewReader(send.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	resp, err = client.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, string(b), "posted from another site")

	// Another instance's token.
	other := newServer(t, ui.Config{Pool: s.pool})
	send.Set("csrf", other.token(id))
	resp, _ = s.post("/tasks/"+id.String()+"/send", send)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	require.Zero(t, s.task(id).InboxLen)
}

func TestReadOnlyHidesAndRefusesActions(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{ReadOnly: true})
	id := s.create(tasks.Spec{Type: "w"})
	status, body := s.get("/tasks/" + id.String())
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "read-only")
	require.NotContains(t, body, "<form method=\"post\"")
	require.NotContains(t, body, `name="csrf"`)

	for _, a := range []string{"send", "cancel"} {
		resp, body := s.post("/tasks/"+id.String()+"/"+a, url.Values{"body": {"1"}, "confirm": {"yes"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, a)
		require.Contains(t, body, "read-only", a)
	}
	tk := s.task(id)
	require.Zero(t, tk.InboxLen)
	require.Equal(t, tasks.StatusReady, tk.Status)
}

func TestMountedUnderAPrefix(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	h, err := ui.New(ui.Config{Pool: pool, Prefix: "/admin/tasks/"})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/admin/tasks/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	id, err := tasks.Create(context.Background(), pool, tasks.Spec{Type: "w"})
	require.NoError(t, err)

	resp, err := client.Get(srv.URL + "/admin/tasks/")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Contains(t, string(b), `href="/admin/tasks/static/ui.css"`)
	require.Contains(t, string(b), `href="/admin/tasks/tasks?type=w"`)

	resp, err = client.Get(srv.URL + "/admin/tasks/tasks/" + id.String())
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(b), `action="/admin/tasks/tasks/`+id.String()+`/send"`)
	require.Contains(t, string(b), `data-live="/admin/tasks/live/tasks/`+id.String()+`"`)

	_, err = ui.New(ui.Config{Pool: pool, Prefix: "admin"})
	require.ErrorContains(t, err, `invalid Config.Prefix "admin"`)
}

func TestNoDatabasePasswordOnAnyPage(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testdb.URL(t))
	require.NoError(t, err)
	const secret = "s3cret-Passw0rd"
	ctx := context.Background()
	admin := testdb.Pool(t, u.String())
	role := "ui_reader_" + strings.ToLower(tasks.NewID().String()[20:])
	_, err = admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN SUPERUSER PASSWORD '"+secret+"'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	u.User = url.UserPassword(role, secret)
	pool := testdb.Pool(t, u.String())
	s := newServer(t, ui.Config{Pool: pool})
	id := s.create(tasks.Spec{Type: "w"})
	_, err = pool.Exec(ctx, `UPDATE corotask.tasks SET failures = 1, last_error = 'x' WHERE task_id = $1`, id)
	require.NoError(t, err)
	for _, path := range []string{"/", "/tasks", "/tasks/" + id.String(), "/tasks/" + id.String() + "/tree", "/tasks/nope"} {
		_, body := s.get(path)
		require.NotContains(t, body, secret, path)
	}
}

func TestLiveUpdatesFollowTheTask(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{RefreshInterval: 50 * time.Millisecond})
	id := s.create(tasks.Spec{Type: "w"})
	ctx, cancel := context.WithTimeout(context.Background(), testdb.Patience)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+"/live/tasks/"+id.String(), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := readEvents(resp.Body)

	first := <-events
	require.Equal(t, "update", first.name)
	require.Contains(t, first.data, "Empty.")

	require.NoError(t, inbox.Send(ctx, s.pool, id, tasks.ID{}, map[string]string{"note": "live!"}))
	for ev := range events {
		if strings.Contains(ev.data, "live!") {
			break
		}
	}
	require.NoError(t, tasks.Cancel(ctx, s.pool, id))
	for ev := range events {
		if strings.Contains(ev.data, "s-canceled") {
			return
		}
	}
	t.Fatal("the stream ended before the task's cancellation was sent")
}

func TestLiveUpdatesOfEveryPage(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{RefreshInterval: 50 * time.Millisecond})
	id := s.create(tasks.Spec{Type: "w.live"})
	for path, want := range map[string]string{
		"/live/":                                `href="/tasks?type=w.live"`,
		"/live/tasks?type=w.live":               id.String(),
		"/live/tasks/" + id.String() + "/tree":  id.String(),
		"/live/tasks/" + tasks.NewID().String(): "task not found",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), testdb.Patience)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		ev := <-readEvents(resp.Body)
		require.Contains(t, ev.data, want, path)
		cancel()
		resp.Body.Close()
	}
}

type event struct{ name, data string }

// readEvents parses a stream of server-sent events.
func readEvents(r io.Reader) <-chan event {
	out := make(chan event)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var ev event
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ev.data = strings.Join(data, "\n")
					out <- ev
				}
				ev, data = event{}, nil
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	return out
}

func TestMissingSchemaSaysToMigrate(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t, testdb.EmptyURL(t))
	s := newServer(t, ui.Config{Pool: pool})
	for _, path := range []string{"/", "/tasks", "/executors", "/tasks/" + tasks.NewID().String()} {
		status, body := s.get(path)
		require.Equal(t, http.StatusInternalServerError, status, path)
		require.Contains(t, body, "The corotask schema of this database is missing or older than this UI: run &#39;corotask migrate&#39;", path)
	}
}

// The task page says whether it shows every entry of the history or only
// the last ones.
func TestTaskPageSaysWhetherHistoryIsComplete(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	few := s.create(tasks.Spec{Type: "w"})
	many := s.create(tasks.Spec{Type: "w"})
	ctx := context.Background()
	for range 3 {
		require.NoError(t, inbox.SendAsOperator(ctx, s.pool, few, tasks.ID{}, 1))
	}
	for range 30 {
		require.NoError(t, inbox.SendAsOperator(ctx, s.pool, many, tasks.ID{}, 1))
	}
	_, body := s.get("/tasks/" + few.String())
	require.Contains(t, body, "3 entries, the latest first")
	require.NotContains(t, body, "the last 3 entries")
	_, body = s.get("/tasks/" + many.String())
	require.Contains(t, body, "the last 25 entries, the latest first")
	require.Contains(t, body, "corotask history "+many.String())
}

// The task page says when a suspended task awaits its children, and how
// many have not ended.
func TestTaskPageSaysWhatATaskAwaits(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	parent := s.create(tasks.Spec{Type: "w"})
	for range 2 {
		s.create(tasks.Spec{Type: "w", Parent: parent})
	}
	_, body := s.get("/tasks/" + parent.String())
	require.NotContains(t, body, "<dt>Awaits</dt>")
	_, err := s.pool.Exec(context.Background(), `UPDATE corotask.tasks SET awaiting_children = true, wake_at = NULL
		WHERE task_id = $1`, parent)
	require.NoError(t, err)
	_, body = s.get("/tasks/" + parent.String())
	require.Contains(t, body, "<dt>Awaits</dt><dd>its children: 2 not ended</dd>")

	// An ended task awaits nothing, whatever its last poll asked.
	require.NoError(t, tasks.Cancel(context.Background(), s.pool, parent))
	_, body = s.get("/tasks/" + parent.String())
	require.NotContains(t, body, "<dt>Awaits</dt>")
	task, err := tasks.Get(context.Background(), s.pool, parent)
	require.NoError(t, err)
	require.False(t, task.AwaitingChildren)
}
