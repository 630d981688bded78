package sql

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// On a distributed database, commit_polls names its trees' roots in its
// UPDATE and its two DELETEs; on one server, the function's file is run as
// it is, the filters comments.
func TestCitusCommitPollsNamesItsRoots(t *testing.T) {
	t.Parallel()
	def, err := citusFiltered[0].definition()
	require.NoError(t, err)
	require.NotContains(t, def, "/*citus:")
	for _, filter := range []string{"AND t.root_id = ANY (v_roots)", "AND m.root_id = ANY (v_roots)", "AND h.root_id = ANY (v_roots)"} {
		require.Equal(t, 1, strings.Count(def, filter), filter)
	}
	require.True(t, strings.HasPrefix(def, "CREATE OR REPLACE FUNCTION corotask.commit_polls("))
	require.True(t, strings.HasSuffix(def, "\n$$;\n"))
}

// On a distributed database, deliver_all's UPDATE names the recipients'
// roots.
func TestCitusDeliverAllNamesItsRoots(t *testing.T) {
	t.Parallel()
	def, err := citusFiltered[1].definition()
	require.NoError(t, err)
	require.NotContains(t, def, "/*citus:")
	require.Equal(t, 1, strings.Count(def, "AND t.root_id = ANY (p_roots)"))
	require.True(t, strings.HasPrefix(def, "CREATE OR REPLACE FUNCTION corotask.deliver_all("))
	require.True(t, strings.HasSuffix(def, "\n$$;\n"))
}

// On a distributed database, deliver_one reads its task's root, and its
// UPDATE names it.
func TestCitusDeliverOneNamesItsRoot(t *testing.T) {
	t.Parallel()
	def, err := citusFiltered[2].definition()
	require.NoError(t, err)
	require.NotContains(t, def, "/*citus:")
	require.Equal(t, 1, strings.Count(def, "SELECT r.root_id INTO root FROM corotask.tasks r WHERE r.task_id = p_to;"))
	require.Equal(t, 1, strings.Count(def, "AND t.root_id = root"))
	require.True(t, strings.HasPrefix(def, "CREATE OR REPLACE FUNCTION corotask.deliver_one("))
}
