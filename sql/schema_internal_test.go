package sql

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseCompatibleFrom(t *testing.T) {
	t.Parallel()
	from, err := parseCompatibleFrom("0009_x.sql", 9, "-- corotask schema, version 9: ...\n-- compatible-from: 8\n\nALTER TABLE t ADD COLUMN c int;\n")
	require.NoError(t, err)
	require.Equal(t, 8, from)
	// None declared: the migration's own version.
	from, err = parseCompatibleFrom("0009_x.sql", 9, "-- corotask schema, version 9\nALTER TABLE t ADD COLUMN c int;\n")
	require.NoError(t, err)
	require.Equal(t, 9, from)
	// Only the header counts: not a comment after the first statement.
	from, err = parseCompatibleFrom("0009_x.sql", 9, "-- header\nSELECT 1;\n-- compatible-from: 3\n")
	require.NoError(t, err)
	require.Equal(t, 9, from)
	for _, bad := range []string{"-- compatible-from: 10", "-- compatible-from: 0", "-- compatible-from: eight", "-- compatible-from:"} {
		_, err := parseCompatibleFrom("0009_x.sql", 9, bad+"\nSELECT 1;\n")
		require.ErrorContains(t, err, "0009_x.sql", bad)
	}
}

// The migrations of this repository declare valid headers.
func TestMigrationsParse(t *testing.T) {
	t.Parallel()
	all, err := Migrations()
	require.NoError(t, err)
	for _, m := range all {
		require.True(t, m.CompatibleFrom >= 1 && m.CompatibleFrom <= m.Version, m.Name)
	}
}
