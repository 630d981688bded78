package testdb

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// WithoutSentAt checks that a stored message envelope says when it was sent
// (within the last minute), and returns it without that time, as JSON, to
// compare the rest.
func WithoutSentAt(t testing.TB, raw []byte) string {
	t.Helper()
	var env map[string]any
	require.NoError(t, json.Unmarshal(raw, &env))
	at, ok := env["at"].(string)
	require.True(t, ok, "envelope %s has no time", raw)
	sent, err := time.Parse(time.RFC3339Nano, at)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), sent, time.Minute)
	delete(env, "at")
	out, err := json.Marshal(env)
	require.NoError(t, err)
	return string(out)
}
