package query

// ListenChannels listens for ready tasks (corotask_ready, payload: the
// task type) and canceled tasks (corotask_cancel, payload: the task id).
const ListenChannels = "LISTEN corotask_ready; LISTEN corotask_cancel"

// ListenProbe is followed by the quoted name of a channel of the probe's
// own; ListenProbeNotify sends $2 on channel $1; ListenProbeFlush is any
// statement, whose reply brings a notification committed before it.
const (
	ListenProbe       = "LISTEN "
	ListenProbeNotify = "SELECT pg_notify($1, $2)"
	ListenProbeFlush  = "SELECT 1"
)
