package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
)

// syncBuffer is a strings.Builder that a running command writes to while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startUI runs `corotask ui` with args until the test ends, and returns the
// URL it serves.
func startUI(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	a := &app{cmd: "corotask", stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return env[k] }}
	code := make(chan int, 1)
	go func() { code <- a.run(ctx, append([]string{"ui", "--addr", "127.0.0.1:0"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case c := <-code:
			require.Equal(t, exitOK, c, "stderr: %s", stderr.String())
		case <-time.After(testdb.Patience):
			t.Error("corotask ui did not stop")
		}
	})
	serving := regexp.MustCompile(`serving on (http://\S+)`)
	var url string
	require.Eventually(t, func() bool {
		m := serving.FindStringSubmatch(stderr.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	}, testdb.Patience, 10*time.Millisecond, "stderr: %s", stderr.String())
	return url
}

func get(t *testing.T, url, user, password string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestUIServes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "ui.test")
	url := startUI(t, nil, "--database-url", c.url)
	status, body := get(t, url, "", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "ui.test")
	status, body = get(t, url+"tasks/"+id.String(), "", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `name="csrf"`)
}

// Served on loopback without authentication, the UI answers only requests
// addressed to a loopback name: a page whose host name was made to resolve to
// 127.0.0.1 (DNS rebinding) cannot read it nor post its forms.
func TestUIRefusesOtherHostsWithoutAuth(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "ui.test")
	url := startUI(t, nil, "--database-url", c.url)
	for _, host := range []string{"attacker.example:8080", "attacker.example", "10.1.2.3:8080"} {
		req, err := http.NewRequest(http.MethodGet, url+"tasks/"+id.String(), nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, host)
		require.NotContains(t, string(b), `name="csrf"`, host)
	}
	for _, host := range []string{"localhost:8080", "127.0.0.1", "[::1]:8080"} {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, host)
	}
}

func TestUIReadOnlyAndPrefix(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "ui.test")
	url := startUI(t, nil, "--database-url", c.url, "--read-only", "--prefix", "/corotask")
	require.True(t, strings.HasSuffix(url, "/corotask/"), url)
	status, body := get(t, url+"tasks/"+id.String(), "", "")
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, body, `name="csrf"`)
	require.Contains(t, body, "read-only")
}

func TestUIBasicAuth(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{args: []string{"--auth", "admin:s3cret"}},
		{env: map[string]string{uiAuthEnv: "admin:s3cret"}},
	} {
		url := startUI(t, tc.env, append([]string{"--database-url", c.url}, tc.args...)...)
		status, body := get(t, url, "", "")
		require.Equal(t, http.StatusUnauthorized, status)
		require.NotContains(t, body, "Overview")
		status, _ = get(t, url, "admin", "wrong")
		require.Equal(t, http.StatusUnauthorized, status)
		status, _ = get(t, url+"static/ui.css", "", "")
		require.Equal(t, http.StatusUnauthorized, status)
		status, body = get(t, url, "admin", "s3cret")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, body, "Overview")
	}
}

func TestUIUsageErrors(t *testing.T) {
	t.Parallel()
	requireUsage(t, runCLI(t, nil, "", "ui", "--auth", "nocolon"), "ui", "--auth: want USER:PASSWORD")
	requireUsage(t, runCLI(t, nil, "", "ui", "--auth", ":pw"), "ui", "--auth: want USER:PASSWORD")
	requireUsage(t, runCLI(t, nil, "", "ui", "--addr", "nope"), "ui", `--addr "nope"`)
	requireUsage(t, runCLI(t, nil, "", "ui", "--addr", "0.0.0.0:8080"), "ui", "is not a loopback address: give --auth")
	requireUsage(t, runCLI(t, nil, "", "ui", "--addr", ":8080"), "ui", "is not a loopback address")
	requireUsage(t, runCLI(t, nil, "", "ui", "extra"), "ui", `unexpected argument "extra"`)
}
