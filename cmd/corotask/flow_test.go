package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPauseResume(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.create("--type", "job")
	c.exec(`INSERT INTO corotask.executors (executor_id, host, pid, version, task_types, concurrency, expires_at)
		VALUES (gen_random_uuid(), 'h', 9, 'v0.0.1', '{job,mail}', 4, now() + interval '1 hour')`)

	require.Equal(t, "paused job: executors claim none of its tasks until 'corotask resume job'\n", c.ok("pause", "job"))
	r := c.run("pause", "job")
	requireError(t, r, "pause", `type "job" is paused already, since `)
	require.Regexp(t, `^corotask pause: type "job" is paused already, since \S+ \S+ by \S+\n$`, r.stderr)
	requireError(t, c.run("pause", "jbo"), "pause", `unknown task type "jbo"`)
	requireError(t, c.run("pause", "jbo"), "pause", "--allow-new-type accepts it")
	c.ok("pause", "--allow-new-type", "jbo")

	// executors marks the paused types.
	require.Regexp(t, `(?m) job \(paused\),mail$`, c.ok("executors"))
	var list []executorJSON
	require.NoError(t, json.Unmarshal([]byte(c.ok("executors", "--json")), &list))
	require.Len(t, list, 1)
	require.Equal(t, "job", string(list[0].PausedTypes[0]))
	require.Len(t, list[0].PausedTypes, 1)

	require.Equal(t, "resumed job\n", c.ok("resume", "job"))
	requireError(t, c.run("resume", "job"), "resume", `type "job" is not paused`)
	require.Regexp(t, `(?m) job,mail$`, c.ok("executors"))

	requireUsage(t, c.run("pause"), "pause", "missing TYPE argument")
	requireUsage(t, c.run("resume", "a", "b"), "resume", `unexpected argument "b"`)
	requireUsage(t, c.run("pause", " job"), "pause", "leading or trailing space")
}

func TestLimit(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	require.Equal(t, "no limits: no type is paused or limited, no key space, no rate limit\n", c.ok("limit"))
	job := c.create("--type", "job")
	c.create("--type", "job")
	c.create("--type", "mail")

	require.Equal(t, "max running of job: 1\n", c.ok("limit", "max-running", "job", "1"))
	require.Equal(t, "key space tenants: at most 2 running per key, over job, mail\n",
		c.ok("limit", "key", "tenants", "2", "--type", "job", "--type", "mail"))
	require.Equal(t, "rate limit api: 10 per 1m0s, taken by mail\n", c.ok("limit", "rate", "api", "10/m", "--type", "mail"))
	require.Equal(t, "rate limit solo: 5 per 1s, its types unchanged (a new limit: none, only tasks.Acquire takes from it)\n",
		c.ok("limit", "rate", "solo", "5/1s"))
	c.exec(`UPDATE corotask.tasks SET claim = gen_random_uuid(), claim_expires_at = now() + interval '1 hour', counted = true
		WHERE task_id = $1`, job)

	out := c.ok("limit")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 10, out)
	require.Regexp(t, `^TYPE +PAUSED +MAX_RUNNING +RUNNING +READY +WAITING +KEY_SPACE +RATE_LIMIT$`, lines[0])
	require.Regexp(t, `^job +- +1 +1 +1 +1 +tenants +-$`, lines[1])
	require.Regexp(t, `^mail +- +- +0 +1 +0 +tenants +api$`, lines[2])
	require.Regexp(t, `^KEY_SPACE +MAX_PER_KEY +KEYS_AT_LIMIT +TYPES$`, lines[4])
	require.Regexp(t, `^tenants +2 +0 +job, mail$`, lines[5])
	require.Regexp(t, `^RATE_LIMIT +RATE +PER +TOKENS +TYPES$`, lines[7])
	require.Regexp(t, `^api +10 +1m0s +10\.0 +mail$`, lines[8])
	require.Regexp(t, `^solo +5 +1s +5\.0 +-$`, lines[9])

	var j limitsJSON
	require.NoError(t, json.Unmarshal([]byte(c.ok("limit", "--json")), &j))
	require.Len(t, j.Types, 2)
	require.Equal(t, 1, *j.Types[0].MaxRunning)
	require.Nil(t, j.Types[0].PausedAt)
	require.Equal(t, 1, j.Types[0].Waiting)
	require.Equal(t, "api", *j.Types[1].RateLimit)
	require.Equal(t, "tenants", j.KeySpaces[0].Name)
	require.Equal(t, 60.0, j.RateLimits[0].PerSec)

	// stats says what the controls do to each type.
	c.ok("pause", "job")
	out = c.ok("stats")
	require.Regexp(t, `(?m)^job .* paused, running 1/1, key space tenants, 1 waiting$`, out)
	require.Regexp(t, `(?m)^mail .* key space tenants, rate limit api, 0 waiting$`, out)
	var s []statsJSON
	require.NoError(t, json.Unmarshal([]byte(c.ok("stats", "--json")), &s))
	require.True(t, s[0].Paused)
	require.Equal(t, 1, *s[0].MaxRunning)
	require.Equal(t, 1, s[0].RunningCounted)
	require.Equal(t, 1, s[0].WaitingOnLimits)
	require.False(t, s[1].Paused)
	require.Nil(t, s[1].MaxRunning)

	require.Equal(t, "max running of job: none\n", c.ok("limit", "max-running", "job", "--clear"))
	require.Equal(t, "key space tenants: removed\n", c.ok("limit", "key", "tenants", "--clear"))
	requireError(t, c.run("limit", "key", "tenants", "--clear"), "limit", `no key limit of key space "tenants"`)
	require.Equal(t, "rate limit api: removed\n", c.ok("limit", "rate", "api", "--clear"))
	requireError(t, c.run("limit", "rate", "api", "--clear"), "limit", `no rate limit "api"`)
	requireError(t, c.run("limit", "max-running", "jbo", "2"), "limit", `unknown task type "jbo"`)
	c.ok("limit", "max-running", "jbo", "2", "--allow-new-type")

	for _, u := range []struct {
		args []string
		want string
	}{
		{[]string{"max-running", "job", "0"}, `invalid N "0": want a positive integer`},
		{[]string{"max-running", "job", "x"}, `invalid N "x"`},
		{[]string{"max-running", "job"}, "missing N argument (or --clear)"},
		{[]string{"max-running", "job", "2", "--type", "a"}, "limit max-running takes no --type"},
		{[]string{"max-running", " job", "2"}, "leading or trailing space"},
		{[]string{"max-running", "job", "2", "3"}, `unexpected argument "3"`},
		{[]string{"key", "tenants", "2"}, "limit key needs the key space's types"},
		{[]string{"key", "--type", "job", "--", "tenants", "-1"}, `invalid N "-1"`},
		{[]string{"key", "", "2", "--type", "job"}, `invalid SPACE ""`},
		{[]string{"key", "tenants", "--clear", "--type", "job"}, "--clear takes no --type"},
		{[]string{"key", "tenants", "2", "--type", ""}, "invalid task type: empty"},
		{[]string{"rate", "api", "10"}, `invalid RATE/PER "10": no slash`},
		{[]string{"rate", "api", "0/1m"}, "RATE is not a positive integer"},
		{[]string{"rate", "api", "10/soon"}, "PER is not a duration"},
		{[]string{"rate", "api", "10/0s"}, "PER is below a millisecond"},
		{[]string{"speed", "x", "1"}, `unknown limit "speed": want max-running, key or rate`},
		{[]string{"--clear"}, "--clear, --type and --allow-new-type go with max-running, key or rate"},
		{[]string{"max-running", "job", "2", "--json"}, "--json goes with 'limit' alone"},
	} {
		requireUsage(t, c.run(append([]string{"limit"}, u.args...)...), "limit", u.want)
	}
}

func TestPriorityAndLimitKey(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	a := c.create("--type", "job")
	b := c.create("--type", "job", "--key", "order-42")
	ls := c.ok("ls")
	require.NotContains(t, ls, "PRIORITY", "no task listed has a priority")
	require.NotContains(t, ls, "LIMIT_KEY", "no task listed has a limit key")

	require.Equal(t, "priority of "+a.String()+": 5 (was 0)\n", c.ok("priority", a.String(), "5"))
	require.Equal(t, "priority of "+b.String()+": 32767 (was 0)\n", c.ok("priority", "--type", "job", "--key", "order-42", "32767"))
	c.exec(`UPDATE corotask.tasks SET limit_key = 'tenant-1' WHERE task_id = $1`, a)

	ls = c.ok("ls")
	lines := strings.Split(strings.TrimSuffix(ls, "\n"), "\n")
	require.Regexp(t, `^ID +TYPE +KEY +PRIORITY +LIMIT_KEY +STATUS `, lines[0])
	require.Regexp(t, `^`+b.String()+` +job +order-42 +32767 +- +ready `, lines[1])
	require.Regexp(t, `^`+a.String()+` +job +- +5 +tenant-1 +ready `, lines[2])
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(c.ok("ls", "--json")), &list))
	require.EqualValues(t, 32767, list[0]["priority"])
	require.Nil(t, list[0]["limit_key"])
	require.Equal(t, "tenant-1", list[1]["limit_key"])

	show := c.ok("show", a.String())
	require.Regexp(t, `(?m)^priority +5$`, show)
	require.Regexp(t, `(?m)^limit_key +tenant-1$`, show)
	require.NotContains(t, c.ok("show", b.String()), "limit_key")
	h := c.ok("history", a.String())
	require.Regexp(t, `(?m)^1 +operator +priority `, h)

	requireUsage(t, c.run("priority", a.String(), "32768"), "priority", `invalid N "32768": want a priority from 0 (the lowest) to 32767`)
	requireUsage(t, c.run("priority", "--", a.String(), "-1"), "priority", `invalid N "-1"`)
	requireUsage(t, c.run("priority", a.String()), "priority", "missing N argument")
	requireUsage(t, c.run("priority"), "priority", "missing TASK argument")
	c.ok("cancel", a.String())
	requireError(t, c.run("priority", a.String(), "1"), "priority", "task has ended: "+a.String())
	requireError(t, c.run("priority", "--type", "job", "--key", "nope", "1"), "priority", "task not found")
}
