package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
	"github.com/corotask/corotask/ui"
)

// The task page and the tree show a task's key; the tasks page searches
// by key.
func TestKeysShownAndSearched(t *testing.T) {
	t.Parallel()
	s := newServer(t, ui.Config{})
	keyed := s.create(tasks.Spec{Type: "orders.checkout", Key: "order 42/é"})
	child := s.create(tasks.Spec{Type: "orders.line", Parent: keyed, Key: "line-1"})
	plain := s.create(tasks.Spec{Type: "orders.checkout"})

	status, body := s.get("/tasks/" + keyed.String())
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dt>Key</dt><dd class="key">order 42/é`)
	require.Contains(t, body, `/tasks?key=order%2042%2f%c3%a9`)

	status, body = s.get("/tasks/" + keyed.String() + "/tree")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<span class="key">order 42/é</span>`)
	require.Contains(t, body, `<span class="key">line-1</span>`)

	status, body = s.get("/tasks?key=order%2042%2F%C3%A9")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, keyed.String())
	require.NotContains(t, body, `>`+plain.String()+`</a>`)
	require.NotContains(t, body, `>`+child.String()+`</a>`)

	status, body = s.get("/tasks?key=" + strings.Repeat("k", 201))
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "key: invalid task key")
}
