// Package examples_test checks what the examples promise as a whole: that
// each can be copied out of the repository, and that the README shows the
// quickstart as it is.
package examples_test

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// No example program imports the module's internal packages: a user copies
// one and builds it with the public packages alone. (Their tests may.)
func TestExamplesImportNoInternalPackage(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*/*.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			require.NotContains(t, path, "corotask/corotask/internal", "%s imports %s", f, path)
		}
	}
}

// The examples that find their database each carry the same database.go.
func TestDatabaseFilesAgree(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*/database.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	first, err := os.ReadFile(files[0])
	require.NoError(t, err)
	for _, f := range files[1:] {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.True(t, bytes.Equal(first, b), "%s differs from %s", f, files[0])
	}
}

// The README's first program is examples/quickstart, from its package clause
// on, so that what the README shows compiles and is tested.
func TestReadmeShowsQuickstart(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("quickstart/main.go")
	require.NoError(t, err)
	_, program, ok := bytes.Cut(src, []byte("\npackage main\n"))
	require.True(t, ok)
	program = append([]byte("```go\npackage main\n"), program...)
	require.Contains(t, string(readme), string(program)+"```\n", "README.md does not show examples/quickstart/main.go as it is")
}
