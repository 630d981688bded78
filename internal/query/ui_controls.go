package query

// The web UI's reads of flow control besides tasks.Controls (which the
// Limits page shows): the overview's paused types, and the controls of one
// type, for a task's page and the pause and resume buttons.

// UIPausedTypes returns the paused types, in order: task_type, paused_at
// and paused_by (empty when unknown). It reads type_controls only.
const UIPausedTypes = `SELECT c.task_type, c.paused_at, coalesce(c.paused_by, '')
FROM corotask.type_controls c WHERE c.paused_at IS NOT NULL ORDER BY 1`

// UITypeControls returns the controls of type $1: paused_at (NULL: not
// paused), paused_by, max_running (0: none), key_space and rate_limit (empty:
// none); no row when the type has none.
const UITypeControls = `SELECT c.paused_at, coalesce(c.paused_by, ''), coalesce(c.max_running, 0),
       coalesce(c.key_space, ''), coalesce(c.rate_limit, '')
FROM corotask.type_controls c WHERE c.task_type = $1`
