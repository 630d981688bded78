package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// FuzzParseJSON: the CLI accepts exactly what encoding/json accepts as one
// JSON value, returns it unchanged but for surrounding space, and rejects the
// rest with a usage error that names the value and, for a syntax error, a
// position inside (or just past) the input.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"approve":true}`, `{"a": }`, `[1,2`, `"text"`, ` 42 `, `{} {}`, "", "\n\n{\n\"a\":\x00}",
		`"\ud800"`, `nul`, "{\"é\": 1,}", `1e999`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, err := parseJSON("message", data)
		if json.Valid(data) {
			require.NoError(t, err)
			require.Equal(t, strings.TrimSpace(string(data)), string(raw))
			return
		}
		require.Error(t, err)
		var u *usageError
		require.ErrorAs(t, err, &u, "bad JSON is a usage error (exit 2)")
		msg := err.Error()
		require.Contains(t, msg, "invalid JSON message")
		if strings.Contains(msg, " at line ") {
			var line, col int
			_, rest, _ := strings.Cut(msg, " at line ")
			_, scanErr := fmt.Sscanf(rest, "%d, column %d:", &line, &col)
			require.NoError(t, scanErr, msg)
			require.GreaterOrEqual(t, line, 1)
			require.GreaterOrEqual(t, col, 1)
			require.LessOrEqual(t, line, 1+strings.Count(string(data), "\n"))
			require.LessOrEqual(t, col, utf8.RuneCount(data)+1)
		}
	})
}
