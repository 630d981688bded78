package sql

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// functionsChecksum identifies the contents of every function file, names
// included.
func functionsChecksum(t *testing.T) string {
	t.Helper()
	files, err := FunctionFiles()
	require.NoError(t, err)
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f.Name + "\x00" + f.SQL + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// A change to a function file comes with a new functionsRelease, so that
// databases can tell newer functions from older ones.
func TestFunctionsReleaseFollowsTheFiles(t *testing.T) {
	t.Parallel()
	got := functionsChecksum(t)
	require.Equal(t, functionsSum, got,
		"the function files changed: raise functionsRelease (now %d) to %d and set functionsSum to %q in sql/release.go",
		functionsRelease, functionsRelease+1, got)
}
