package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
	"github.com/corotask/corotask/ui"
)

// exec runs statements that set the database up as a test needs it.
func (s *server) exec(sql string, args ...any) {
	s.t.Helper()
	_, err := s.pool.Exec(context.Background(), sql, args...)
	require.NoError(s.t, err)
}

// seedLimits sets a control of each kind, and tasks that they hold back:
// mail.send is paused and takes from rate limit smtp, whose bucket is
// empty; img.resize runs its maximum of 2 with 3 ready; key acme of key
// space tenants (billing.charge and img.resize) runs its 1, and 2 of its
// tasks wait. It returns a task of billing.charge of key acme, of priority 7.
func seedLimits(s *server) tasks.ID {
	s.t.Helper()
	s.exec(`INSERT INTO corotask.key_limits (key_space, max_running) VALUES ('tenants', 1)`)
	s.exec(`INSERT INTO corotask.rate_limits (name, rate, per, tokens, refilled_at) VALUES ('smtp', 10, interval '1 day', 0, now())`)
	s.exec(`INSERT INTO corotask.type_controls (task_type, paused_at, paused_by, max_running, key_space, rate_limit) VALUES
		('mail.send', now() - interval '5 minutes', 'ops', NULL, NULL, 'smtp'),
		('img.resize', NULL, NULL, 2, 'tenants', NULL),
		('billing.charge', NULL, NULL, NULL, 'tenants', NULL)`)
	run := func(typ tasks.Type, key string) {
		id := s.create(tasks.Spec{Type: typ})
		s.exec(`UPDATE corotask.tasks SET claim = gen_random_uuid(), heartbeat = now(), claim_expires_at = now() + interval '1 hour',
			counted = true, limit_key = nullif($2, '') WHERE task_id = $1`, id, key)
	}
	run("img.resize", "")
	run("img.resize", "")
	run("billing.charge", "acme")
	for range 3 {
		s.create(tasks.Spec{Type: "img.resize"})
	}
	s.create(tasks.Spec{Type: "mail.send"})
	var acme tasks.ID
	for i := range 2 {
		acme = s.create(tasks.Spec{Type: "billing.charge"})
		s.exec(`UPDATE corotask.tasks SET limit_key = 'acme', priority = $2 WHERE task_id = $1`, acme, 7*i)
	}
	return acme
}

// cells returns the text of each cell of the table row that starts with
// the type's cell, on a page.
func rowOf(t *testing.T, body, typ string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr data-type="` + regexp.QuoteMeta(typ) + `">(.*?)</tr>`).FindStringSubmatch(body)
	require.NotNil(t, m, "no row of type %s in:\n%s", typ, body)
	return regexp.MustCompile(`\s+`).ReplaceAllString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[1], " "), " ")
}

func TestLimitsPage(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	acme := seedLimits(s)

	status, body := s.get("/limits")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<a href="/limits" class="on">Limits</a>`)
	require.Regexp(t, `^ mail.send paused by ops, 5m\d*s? ago 0 no maximum 1 1 smtp Resume… $`, rowOf(t, body, "mail.send"))
	require.Equal(t, " img.resize active 2 / 2 3 3 tenants Pause… ", rowOf(t, body, "img.resize"))
	require.Equal(t, " billing.charge active 1 no maximum 2 2 tenants Pause… ", rowOf(t, body, "billing.charge"))
	require.Contains(t, body, `<td class="key">acme</td><td class="num">1</td><td class="num"><span class="bad">2</span></td>`)
	require.Regexp(t, `(?s)<tr id="rate-smtp">\s*<td>smtp</td>\s*<td>10 / 1d</td>.*0\.0 / 10.*mail.send`, body)

	// The overview marks the paused type, and offers to resume it.
	status, body = s.get("/")
	require.Equal(t, http.StatusOK, status, body)
	require.Regexp(t, ` mail.send paused .* Resume… $`, rowOf(t, body, "mail.send"))
	require.Regexp(t, `Pause… $`, rowOf(t, body, "img.resize"))
	require.NotContains(t, rowOf(t, body, "img.resize"), "paused")

	// Lists show the priority and the limit key of their tasks; the page
	// of a task shows them and its type's limits.
	status, body = s.get("/tasks?type=billing.charge&status=limited")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<th class="num" title="claim order: the higher first">Priority</th><th title="its key in its type's key space">Limit key</th>`)
	require.Regexp(t, `(?s)`+acme.String()+`.*<td class="num">7</td>\s*<td class="key">acme</td>\s*<td><span class="status s-limited">limited</span>`, body)
	status, body = s.get("/tasks/" + acme.String())
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dt>Priority</dt><dd>7</dd>`)
	require.Contains(t, body, `<dt>Limit key</dt><dd class="key">acme <small>in key space <a href="/limits#space-tenants">tenants</a></small></dd>`)
	require.Contains(t, body, `<span class="status s-limited">limited</span>`)
}

// typeToken reads the CSRF token of the Limits page.
func (s *server) typeToken() string {
	s.t.Helper()
	status, body := s.get("/limits")
	require.Equal(s.t, http.StatusOK, status, body)
	m := tokenRE.FindStringSubmatch(body)
	require.NotNil(s.t, m, "no token on the Limits page")
	return m[1]
}

// paused says since when type typ is paused, by whom: "" when it is not.
func (s *server) pausedBy(typ string) (bool, string) {
	s.t.Helper()
	var paused bool
	var by string
	err := s.pool.QueryRow(context.Background(), `SELECT paused_at IS NOT NULL, coalesce(paused_by, '') FROM corotask.type_controls WHERE task_type = $1`, typ).
		Scan(&paused, &by)
	if err != nil {
		return false, ""
	}
	return paused, by
}

func TestPauseAndResumeAType(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	seedLimits(s)
	token := s.typeToken()
	form := func(typ, back string, confirm bool) url.Values {
		f := url.Values{"csrf": {token}, "type": {typ}, "back": {back}}
		if confirm {
			f.Set("confirm", "yes")
		}
		return f
	}

	// Without the token, nothing is done.
	resp, body := s.post("/types/pause", url.Values{"type": {"img.resize"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	require.Contains(t, body, "the form&#39;s token is missing or stale")
	paused, _ := s.pausedBy("img.resize")
	require.False(t, paused)

	// First the question, then the pause, and back to the page.
	resp, body = s.post("/types/pause", form("img.resize", "limits", false))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Pause type img.resize? No executor claims its tasks until it is resumed")
	require.Contains(t, body, `<input type="hidden" name="type" value="img.resize">`)
	require.Contains(t, body, `<a href="/limits">No, back</a>`)
	paused, _ = s.pausedBy("img.resize")
	require.False(t, paused, "asked, not done")
	resp, body = s.post("/types/pause", form("img.resize", "limits", true))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/limits?done=pause", resp.Header.Get("Location"))
	paused, _ = s.pausedBy("img.resize")
	require.True(t, paused)
	status, body := s.get("/limits?done=pause")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Type paused: executors claim none of its tasks until it is resumed.")
	require.Regexp(t, `^ img.resize paused .* 2 / 2 3 3 tenants Resume… $`, rowOf(t, body, "img.resize"))

	// Paused already: refused, on the page it was posted from.
	resp, body = s.post("/types/pause", form("img.resize", "overview", true))
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Contains(t, body, "type img.resize is paused already, since ")
	require.Contains(t, body, "<h1>Overview</h1>")

	// Resumed from the overview, and back there.
	resp, body = s.post("/types/resume", form("img.resize", "overview", false))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Resume type img.resize, paused since ")
	resp, body = s.post("/types/resume", form("img.resize", "overview", true))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/?done=resume", resp.Header.Get("Location"))
	paused, _ = s.pausedBy("img.resize")
	require.False(t, paused)
	resp, body = s.post("/types/resume", form("img.resize", "limits", true))
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Contains(t, body, "type img.resize is not paused")

	// A type that is not one.
	resp, body = s.post("/types/pause", form(" ", "limits", true))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Contains(t, body, "type: ")

	// Read-only: no button, and a post is refused.
	ro := newServer(t, ui.Config{Pool: s.pool, ReadOnly: true})
	status, body = ro.get("/limits")
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, "Pause…")
	resp, body = ro.post("/types/pause", form("img.resize", "limits", true))
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	paused, _ = s.pausedBy("img.resize")
	require.False(t, paused)
}

// The executors page marks the paused types among those an executor
// serves.
func TestExecutorsMarkPausedTypes(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	s.exec(`INSERT INTO corotask.executors (executor_id, host, pid, version, task_types, concurrency, expires_at)
		VALUES (gen_random_uuid(), 'h', 1, 'v', '{mail.send,img.resize}', 4, now() + interval '1 hour')`)
	s.create(tasks.Spec{Type: "mail.send"})
	require.NoError(t, tasks.Pause(context.Background(), s.pool, "mail.send"))
	status, body := s.get("/executors")
	require.Equal(t, http.StatusOK, status, body)
	require.Regexp(t, `<a href="/tasks\?type=mail.send">mail.send</a> <a href="/limits" class="badge paused" title="paused since [^"]+">paused</a>, `+
		`<a href="/tasks\?type=img.resize">img.resize</a></td>`, body)
}
