package query

// ReleaseClaims gives claims back without counting a failure (see
// corotask.release_claims): $1 the tasks, $2 their claim tokens, $3 the
// delay after which they are ready again. Returns how many it released.
const ReleaseClaims = `SELECT corotask.release_claims($1, $2, $3)`

// ReleaseLockParents locks the tasks $1 (the parents of children a batch
// of unknown fate may have created), in task order, for the rest of the
// transaction: a batch still running on the server holds them until its end.
const ReleaseLockParents = `SELECT 1 FROM corotask.tasks WHERE task_id = ANY ($1)
			ORDER BY task_id FOR UPDATE`

// ReleaseChildren is ReleaseClaims at once ($1 the tasks, $2 their claim
// tokens), for the children of a batch whose reply was lost.
const ReleaseChildren = `SELECT corotask.release_claims($1, $2, '0')`
