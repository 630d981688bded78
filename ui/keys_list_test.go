package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
	"github.com/corotask/corotask/ui"
)

// keyHeader is the key column's heading in a table of tasks.
const keyHeader = `<th>Key</th>`

// A table of tasks has a key column when a task it lists has a key, its
// text escaped and linked to every task with that key; a table of tasks
// without keys has none.
func TestListsShowKeys(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	keyed := s.create(tasks.Spec{Type: "orders.checkout", Key: `<b>order</b> 7`})
	s.create(tasks.Spec{Type: "orders.checkout"})
	s.create(tasks.Spec{Type: "emails.send"})

	status, body := s.get("/tasks")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, keyHeader)
	require.Contains(t, body, `<td class="key"><a href="/tasks?key=%3cb%3eorder%3c%2fb%3e%207" title="every task with this key">&lt;b&gt;order&lt;/b&gt; 7</a></td>`)
	require.NotContains(t, body, `<b>order</b>`)
	require.Contains(t, body, `<td class="key"></td>`, "a task without a key has an empty cell")

	status, body = s.get("/tasks?type=emails.send")
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, keyHeader)
	require.NotContains(t, body, `class="key"`)

	// The overview's failing tasks.
	_, err := s.pool.Exec(context.Background(), `UPDATE corotask.tasks SET failures = 1, last_error = 'boom' WHERE task_id = $1`, keyed)
	require.NoError(t, err)
	status, body = s.get("/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, keyHeader)
	require.Contains(t, body, `&lt;b&gt;order&lt;/b&gt; 7</a></td>`)

	// A task's children.
	parent := s.create(tasks.Spec{Type: "orders.batch"})
	s.create(tasks.Spec{Type: "orders.line", Parent: parent, Key: "line-1"})
	s.create(tasks.Spec{Type: "orders.line", Parent: parent})
	status, body = s.get("/tasks/" + parent.String())
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, keyHeader)
	require.Contains(t, body, `<a href="/tasks?key=line-1" title="every task with this key">line-1</a>`)

	plain := s.create(tasks.Spec{Type: "orders.batch"})
	s.create(tasks.Spec{Type: "orders.line", Parent: plain})
	status, body = s.get("/tasks/" + plain.String())
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, keyHeader)
}

// The header's box goes to a task by ID, and lists the tasks with a key
// given anything else, taken whole as the key.
func TestGotoByIDOrKey(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{Prefix: "/ops"})
	id := s.create(tasks.Spec{Type: "users.sync", Key: "user:42"})
	s.create(tasks.Spec{Type: "users.sync"})

	for _, box := range []string{id.String(), " " + id.UUID() + " "} {
		resp, err := client.Get(s.srv.URL + "/ops/goto?id=" + strings.ReplaceAll(box, " ", "+"))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, box)
		require.Equal(t, "/ops/tasks/"+id.String(), resp.Header.Get("Location"), box)
	}

	resp, err := client.Get(s.srv.URL + "/ops/goto?id=+user%3A42+")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/ops/tasks?key=user%3A42", resp.Header.Get("Location"))
	status, body := s.get(resp.Header.Get("Location"))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `>`+id.String()+`</a>`)
	require.Contains(t, body, keyHeader)
	require.Contains(t, body, "The counts by status are of every task, not only those with key user:42.")
	require.Contains(t, body, `<td class="key"><a href="/ops/tasks?key=user%3a42" title="every task with this key">user:42</a></td>`)
	require.Equal(t, 1, strings.Count(body, `<td class="id">`), "only the task with the key")

	for _, box := range []string{"", "+", strings.Repeat("k", tasks.MaxKeyLen+1)} {
		status, body := s.get("/ops/goto?id=" + box)
		require.Equal(t, http.StatusBadRequest, status, box)
		require.Contains(t, body, "neither a task ID nor a key: invalid task key", box)
	}
}

// A key shaped like a task ID (an order's UUID) that no task has as its ID
// lists the tasks with that key.
func TestGotoByIDShapedKey(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	key := tasks.NewID().UUID()
	id := s.create(tasks.Spec{Type: "orders.checkout", Key: key})

	resp, err := client.Get(s.srv.URL + "/goto?id=" + key)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/tasks?key="+key, resp.Header.Get("Location"))
	status, body := s.get(resp.Header.Get("Location"))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `>`+id.String()+`</a>`)
}
