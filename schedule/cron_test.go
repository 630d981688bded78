package schedule_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/schedule"
)

func TestCronNext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr, zone, after string
		want              []string // the next slots, in order
	}{
		{"* * * * *", "", "2026-01-01T00:00:30Z", []string{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"}},
		{"*/15 * * * *", "", "2026-01-01T00:14:00Z", []string{"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z"}},
		{"5,10-12 3 * * *", "", "2026-01-01T00:00:00Z", []string{"2026-01-01T03:05:00Z", "2026-01-01T03:10:00Z", "2026-01-01T03:11:00Z", "2026-01-01T03:12:00Z", "2026-01-02T03:05:00Z"}},
		{"0 9-17/4 * * *", "", "2026-01-01T09:00:00Z", []string{"2026-01-01T13:00:00Z", "2026-01-01T17:00:00Z", "2026-01-02T09:00:00Z"}},
		{"30 2/10 * * *", "", "2026-01-01T00:00:00Z", []string{"2026-01-01T02:30:00Z", "2026-01-01T12:30:00Z", "2026-01-01T22:30:00Z"}},
		{"0 0 * JAN,jul *", "", "2026-02-01T00:00:00Z", []string{"2026-07-01T00:00:00Z", "2026-07-02T00:00:00Z"}},
		{"0 0 * * MON-FRI", "", "2026-01-02T12:00:00Z", []string{"2026-01-05T00:00:00Z", "2026-01-06T00:00:00Z"}}, // 2 Jan 2026 is a Friday
		{"0 0 * * 7", "", "2026-01-01T00:00:00Z", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},       // 7 is Sunday
		// Both day fields restricted: either matches (the 13th, or a Friday).
		{"0 0 13 * FRI", "", "2026-01-08T00:00:00Z", []string{"2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z", "2026-01-16T00:00:00Z"}},
		// Day-of-week "*": only day-of-month counts.
		{"0 0 31 * *", "", "2026-01-31T00:00:00Z", []string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z"}},
		{"0 0 29 FEB *", "", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z"}},
		{"@hourly", "", "2026-01-01T10:59:59Z", []string{"2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"}},
		{"@daily", "", "2026-01-01T10:00:00Z", []string{"2026-01-02T00:00:00Z"}},
		{"@weekly", "", "2026-01-01T10:00:00Z", []string{"2026-01-04T00:00:00Z"}},
		{"@monthly", "", "2026-01-01T00:00:00Z", []string{"2026-02-01T00:00:00Z"}},
		{"@yearly", "", "2026-01-01T00:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"@every 90s", "", "2026-01-01T00:00:00Z", []string{"2026-01-01T00:01:30Z", "2026-01-01T00:03:00Z"}},
		{"0 9 * * *", "Asia/Tokyo", "2026-01-01T00:00:00Z", []string{"2026-01-02T00:00:00Z"}}, // 09:00 JST
		// Paris springs forward on 29 March 2026 at 02:00 (to 03:00):
		// 02:30 does not exist that day and is skipped.
		{"30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z", []string{"2026-03-28T02:30:00+01:00", "2026-03-30T02:30:00+02:00"}},
		{"*/30 * * * *", "Europe/Paris", "2026-03-29T01:00:00+01:00", []string{"2026-03-29T01:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00"}},
		// New York falls back on 1 November 2026 at 02:00 EDT (to 01:00
		// EST): 01:30 occurs twice and runs once, the first time.
		{"30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", []string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"0,30 * * * *", "America/New_York", "2026-11-01T00:45:00-04:00", []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T02:00:00-05:00"}},
		{"0 0 30 2 *", "", "2026-01-01T00:00:00Z", []string{"0001-01-01T00:00:00Z"}}, // never
	} {
		c, err := schedule.ParseCron(tc.expr, tc.zone)
		require.NoError(t, err, tc.expr)
		after, err := time.Parse(time.RFC3339, tc.after)
		require.NoError(t, err)
		if tc.after[len(tc.after)-1] == 'Z' && tc.zone != "" {
			after = after.In(c.Location())
		}
		// The first slot may be before "after" in the table's listing when
		// it is the slot of the previous day: start from the first one.
		for i, w := range tc.want {
			want, err := time.Parse(time.RFC3339, w)
			require.NoError(t, err)
			got := c.Next(after)
			if i == 0 && got.After(want) && !want.After(after) {
				after = want
				continue
			}
			require.True(t, want.Equal(got), "%s in %q after %s: got %s, want %s", tc.expr, tc.zone, after, got, want)
			after = got
		}
	}
}

func TestParseCronErrors(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		"":                 "0 fields, want 5",
		"* * * *":          "4 fields, want 5",
		"60 * * * *":       `minute field "60": 60 is out of range 0-59`,
		"* 24 * * *":       `hour field "24"`,
		"* * 0 * *":        `day-of-month field "0"`,
		"* * * FOO *":      `month field "FOO": "FOO" is neither a number nor a name`,
		"* * * * MON-SUNX": `day-of-week field`,
		"*/0 * * * *":      `minute field "*/0": step "0" is not a positive number`,
		"5-1 * * * *":      `range "5-1" runs backwards`,
		"1,,2 * * * *":     "empty list item",
		"@often":           "unknown shorthand",
		"@every":           "@every needs a duration",
		"@every 500ms":     "shorter than 1s",
		"@every soon":      "@every: time: invalid duration",
	} {
		_, err := schedule.ParseCron(expr, "")
		require.ErrorContains(t, err, want, expr)
	}
	_, err := schedule.ParseCron("* * * * *", "Mars/Olympus")
	require.ErrorContains(t, err, `invalid time zone "Mars/Olympus"`)
}

// A step larger than its field's range is refused, however large.
func TestCronStepOutOfRange(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"1/9223372036854775807 * * * *", "*/61 * * * *", "0 */25 * * *"} {
		_, err := schedule.ParseCron(expr, "")
		require.ErrorContains(t, err, "larger than the field's range", expr)
	}
	c, err := schedule.ParseCron("@EVERY 1m", "")
	require.NoError(t, err, "shorthands are case-insensitive")
	require.Equal(t, time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC), c.Next(time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)))
}
