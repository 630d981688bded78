package sql

import (
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/sql/internal/releases"
)

// A change to a function file comes with a new release recorded in
// releases.go, so that databases can tell newer functions from older ones.
func TestFunctionsReleaseFollowsTheFiles(t *testing.T) {
	t.Parallel()
	embedded, err := fs.Sub(files, "functions")
	require.NoError(t, err)
	sum, err := releases.Checksum(embedded)
	require.NoError(t, err)
	last := functionReleases[len(functionReleases)-1]
	require.Equal(t, last.sum, sum,
		"the function files differ from release %d's: run 'go generate ./sql' (it records release %d in sql/releases.go) and commit sql/releases.go with them",
		last.number, last.number+1)
	require.Equal(t, last.number, functionsRelease)
}

// The record the generator reads is the one the build compiles: releases
// numbered from 1 up, one by one.
func TestFunctionReleasesAreTheGeneratorsRecord(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("releases.go")
	require.NoError(t, err)
	parsed := releases.Parse(src)
	require.Len(t, parsed, len(functionReleases))
	for i, r := range functionReleases {
		require.Equal(t, releases.Release{Number: i + 1, Sum: r.sum}, parsed[i])
		require.Equal(t, i+1, r.number)
	}
	require.Equal(t, string(src), string(releases.Format(parsed)),
		"sql/releases.go was edited by hand: restore it and run 'go generate ./sql'")
}
