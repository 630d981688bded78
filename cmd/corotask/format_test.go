package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRelative(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	for _, tc := range []struct {
		t    *time.Time
		want string
	}{
		{nil, "-"},
		{&time.Time{}, "-"},
		{at(0), "now"},
		{at(900 * time.Millisecond), "now"},
		{at(-900 * time.Millisecond), "now"},
		{at(5 * time.Second), "in 5s"},
		{at(-5 * time.Second), "5s ago"},
		{at(-190 * time.Second), "3m10s ago"},
		{at(3 * time.Minute), "in 3m"},
		{at(2*time.Hour + 5*time.Minute + 30*time.Second), "in 2h5m"},
		{at(-2 * time.Hour), "2h ago"},
		{at(76 * time.Hour), "in 3d4h"},
		{at(-48 * time.Hour), "2d ago"},
	} {
		require.Equal(t, tc.want, relative(tc.t, now), "%v", tc.t)
	}
}

func TestParseJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
	}{
		{`{"a": }`, "invalid JSON x at line 1, column 7: invalid character '}' looking for beginning of value"},
		{"[\n1,\n2,,\n]", "invalid JSON x at line 3, column 3: invalid character ','"},
		{`"ünïcode" 1`, "invalid JSON x at line 1, column 11: invalid character '1' after top-level value"},
		{`[1, 2`, "invalid JSON x at line 1, column 6: unexpected end of JSON input"},
		{"[1,\n", "invalid JSON x at line 2, column 1: unexpected end of JSON input"},
		{"", "invalid JSON x: empty"},
		{"\t\n ", "invalid JSON x: empty"},
	} {
		_, err := parseJSON("x", []byte(tc.in))
		require.ErrorContains(t, err, tc.want, "%q", tc.in)
		var ue *usageError
		require.ErrorAs(t, err, &ue)
	}
	for _, in := range []string{`1`, `"s"`, ` {"a": [1, 2.5, null, true]} `, "null\n"} {
		raw, err := parseJSON("x", []byte(in))
		require.NoError(t, err, "%q", in)
		require.JSONEq(t, in, string(raw))
	}
}
