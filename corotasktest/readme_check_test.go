package corotasktest_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's "Testing your pollers" shows readme_test.go as it is, in a
// package of the reader's.
func TestReadmeShowsReadmeTest(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("readme_test.go")
	require.NoError(t, err)
	_, rest, ok := bytes.Cut(src, []byte("package corotasktest_test\n"))
	require.True(t, ok)
	shown := "```go\npackage shop_test\n" + string(rest) + "```\n"
	require.Contains(t, string(readme), shown, "README.md does not show corotasktest/readme_test.go as it is")
}
