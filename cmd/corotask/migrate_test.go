package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
)

func TestMigrate(t *testing.T) {
	t.Parallel()
	migrations, err := corosql.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, migrations)
	functions, err := corosql.FunctionFiles()
	require.NoError(t, err)
	require.NotEmpty(t, functions)
	var want strings.Builder
	for _, m := range migrations {
		fmt.Fprintf(&want, "applied %s\n", m.Name)
	}
	for _, f := range functions {
		fmt.Fprintf(&want, "applied functions/%s\n", f.Name)
	}
	last := migrations[len(migrations)-1].Version

	c := &cli{t: t, url: testdb.EmptyURL(t)}
	require.Equal(t, want.String(), c.ok("migrate"))
	require.Equal(t, fmt.Sprintf("schema up to date (version %d)\n", last), c.ok("migrate"))
	// The schema works.
	c.create("--type", "t")
	require.Equal(t, 1, c.count())
}
