package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// create --priority and --limit-key set them; bad values are refused before
// anything is created.
func TestCreateWithPriorityAndLimitKey(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.create("--type", "reports.build", "--priority", "7", "--limit-key", "tenant-1")
	s := c.show(id)
	require.Equal(t, 7, s.Priority)
	require.NotNil(t, s.LimitKey)
	require.Equal(t, "tenant-1", *s.LimitKey)
	for _, bad := range [][]string{{"--priority", "-1"}, {"--priority", "40000"}, {"--limit-key", ""}} {
		r := c.run(append([]string{"create", "--type", "reports.build"}, bad...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", bad, r)
		require.Contains(t, r.stderr, bad[0])
	}
	require.Equal(t, 1, c.count())
}

// limit --history shows the changes of the controls, the latest first.
func TestLimitHistory(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	require.Contains(t, c.ok("limit", "--history", "5"), "no changes of the controls recorded")
	c.ok("pause", "reports.build", "--allow-new-type")
	c.ok("limit", "max-running", "reports.build", "4")
	var changes []struct{ Action, Subject, Detail, By string }
	require.NoError(t, json.Unmarshal([]byte(c.ok("limit", "--history", "5", "--json")), &changes))
	require.Len(t, changes, 2)
	require.Equal(t, "max_running", changes[0].Action)
	require.Equal(t, "4", changes[0].Detail)
	require.Equal(t, "pause", changes[1].Action)
	require.Equal(t, "reports.build", changes[1].Subject)
	require.NotEmpty(t, changes[1].By)
	r := c.run("limit", "--history", "0")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--history")
}

// Setting a key space with fewer types says which types leave it.
func TestLimitKeySaysWhichTypesLeave(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("limit", "key", "tenants", "2", "--type", "a", "--type", "b", "--allow-new-type")
	out := c.ok("limit", "key", "tenants", "3", "--type", "a")
	require.Contains(t, out, "key space tenants: at most 3 running per key, over a; no longer over b")
}
