package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/sql/internal/releases"
)

// run records changed files as the next release, and leaves the record as it
// is when they have not changed.
func TestRunRecordsAChangeOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	functions, record := filepath.Join(dir, "functions"), filepath.Join(dir, "releases.go")
	require.NoError(t, os.Mkdir(functions, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(functions, "api.sql"), []byte("SELECT 1"), 0o644))
	sum, err := releases.Checksum(os.DirFS(functions))
	require.NoError(t, err)
	start := releases.Format([]releases.Release{{Number: 8, Sum: sum}})
	require.NoError(t, os.WriteFile(record, start, 0o644))

	require.NoError(t, run(functions, record))
	got, err := os.ReadFile(record)
	require.NoError(t, err)
	require.Equal(t, string(start), string(got), "unchanged files")

	require.NoError(t, os.WriteFile(filepath.Join(functions, "api.sql"), []byte("SELECT 2"), 0o644))
	require.NoError(t, run(functions, record))
	require.NoError(t, run(functions, record))
	got, err = os.ReadFile(record)
	require.NoError(t, err)
	parsed := releases.Parse(got)
	require.Len(t, parsed, 2)
	require.Equal(t, 9, parsed[1].Number)
}

func TestRunRefusesAnEmptyRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	record := filepath.Join(dir, "releases.go")
	require.NoError(t, os.WriteFile(record, []byte("package sql\n"), 0o644))
	require.ErrorContains(t, run(dir, record), "records no release")
}
