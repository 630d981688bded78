package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/schedule"
)

// listScheduleJSON returns what `schedule ls --json` says.
func (c *cli) listSchedules() []scheduleJSON {
	c.t.Helper()
	var out []scheduleJSON
	require.NoError(c.t, json.Unmarshal([]byte(c.ok("schedule", "ls", "--json")), &out))
	return out
}

func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	e := executor.MustNew(testdb.Pool(t, c.url), executor.Config{Logger: corotasktest.Logger(t)})
	schedule.Register(e)
	poll := func() {
		_, err := corotasktest.RunUntilIdle(context.Background(), e)
		require.NoError(t, err)
	}

	out := c.ok("schedule", "create", "nightly", "--type", "reports.build", "--cron", "30 2 * * *",
		"--tz", "Europe/Paris", "--state", `{"kind": "daily"}`, "--missed", "all", "--max-missed", "5", "--no-overlap")
	require.Regexp(t, `^schedule nightly: task [0-9A-Z]{26}\n$`, out)
	require.Equal(t, out, c.ok("schedule", "create", "nightly", "--type", "reports.build", "--cron", "30 2 * * *",
		"--tz", "Europe/Paris", "--state", `{"kind": "daily"}`, "--missed", "all", "--max-missed", "5", "--no-overlap"),
		"create is idempotent")
	poll()
	list := c.listSchedules()
	require.Len(t, list, 1)
	s := list[0]
	require.Equal(t, "nightly", s.Name)
	require.Equal(t, "30 2 * * *", s.Cron)
	require.Equal(t, "Europe/Paris", s.TimeZone)
	require.JSONEq(t, `{"kind": "daily"}`, string(s.State))
	require.Equal(t, schedule.MissedAll, s.Missed)
	require.Equal(t, 5, s.MaxMissed)
	require.True(t, s.NoOverlap)
	require.False(t, s.Paused)
	require.NotNil(t, s.Next)
	require.Nil(t, s.LastRun)

	table := c.ok("schedule", "ls")
	require.Contains(t, table, "NAME")
	require.Contains(t, table, "nightly")
	require.Contains(t, table, "Europe/Paris")

	require.Equal(t, "schedule nightly: pause sent\n", c.ok("schedule", "pause", "nightly"))
	poll()
	require.True(t, c.listSchedules()[0].Paused)
	require.Equal(t, "schedule nightly: resume sent\n", c.ok("schedule", "resume", "nightly"))
	poll()
	require.False(t, c.listSchedules()[0].Paused)

	require.Equal(t, "schedule nightly: backfill sent\n",
		c.ok("schedule", "backfill", "nightly", "--from", "2026-03-01T00:00:00Z", "--to", "2026-03-03T00:00:00Z"))
	poll()
	require.Equal(t, 2, c.listSchedules()[0].Runs, "1 and 2 March, 02:30 in Paris")

	require.Equal(t, "schedule nightly: delete sent\n", c.ok("schedule", "delete", "nightly"))
	poll()
	require.Empty(t, c.listSchedules())

	requireError(t, c.run("schedule", "pause", "nightly"), "schedule", "not found")
	requireError(t, c.run("schedule", "create", "x", "--type", "t", "--cron", "* * * * 8"), "schedule", `day-of-week field "8"`)
	requireError(t, c.run("schedule", "create", "x", "--type", "t", "--cron", "@daily", "--tz", "Nowhere"), "schedule", `invalid time zone "Nowhere"`)
	requireError(t, c.run("schedule", "create", "a b", "--type", "t", "--cron", "@daily"), "schedule", `invalid schedule name "a b"`)
}

func TestScheduleUsage(t *testing.T) {
	t.Parallel()
	for args, want := range map[*[]string]string{
		{"schedule"}:                                              "missing SUBCOMMAND argument",
		{"schedule", "run"}:                                       `unknown subcommand "run"`,
		{"schedule", "pause"}:                                     "missing NAME argument",
		{"schedule", "pause", "a", "b"}:                           `unexpected argument "b"`,
		{"schedule", "ls", "x"}:                                   `unexpected argument "x"`,
		{"schedule", "ls", "--cron", "@daily"}:                    "--cron does not go with schedule ls",
		{"schedule", "create", "n", "--type", "t"}:                "create needs --type and --cron",
		{"schedule", "backfill", "n", "--from", "x"}:              "backfill needs --from and --to",
		{"schedule", "backfill", "n", "--from", "x", "--to", "y"}: `invalid --from "x"`,
		{"schedule", "create", "n", "--type", "t", "--cron", "@daily", "--state", "{"}:      "--state",
		{"schedule", "create", "n", "--type", "t", "--cron", "@daily", "--max-missed", "0"}: `invalid --max-missed "0"`,
	} {
		requireUsage(t, runCLI(t, nil, "", *args...), "schedule", want)
	}
}
