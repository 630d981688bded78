package sql

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// On a distributed database, the functions of citusFiltered name the roots
// of the trees they write: commit_polls in its UPDATE and its two DELETEs,
// deliver_all in its UPDATE, deliver_one in its UPDATE after reading its
// task's root. On one server their files are run as they are, the filters
// comments.
func TestCitusFunctionsNameTheirRoots(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"corotask.commit_polls": {"AND t.root_id = ANY (v_roots)", "AND m.root_id = ANY (v_roots)", "AND h.root_id = ANY (v_roots)"},
		"corotask.deliver_all":  {"AND t.root_id = ANY (p_roots)"},
		"corotask.deliver_one":  {"SELECT r.root_id INTO root FROM corotask.tasks r WHERE r.task_id = p_to;", "AND t.root_id = root"},
	}
	require.Len(t, citusFiltered, len(want))
	for _, f := range citusFiltered {
		def, err := f.definition()
		require.NoError(t, err)
		require.NotContains(t, def, "/*citus:", f.function)
		filters, ok := want[f.function]
		require.True(t, ok, f.function)
		for _, filter := range filters {
			require.Equal(t, 1, strings.Count(def, filter), "%s: %s", f.function, filter)
		}
		require.True(t, strings.HasPrefix(def, "CREATE OR REPLACE FUNCTION "+f.function+"("), f.function)
		require.True(t, strings.HasSuffix(def, "\n$$;\n"), f.function)
	}
}
