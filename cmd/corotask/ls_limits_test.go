package main

import (
	"testing"
)

// ls --status paused and --status limited list the ready tasks that flow
// control holds back: those of a paused type, and those of a type at its
// maximum of running polls.
func TestLsPausedAndLimited(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.exec(`INSERT INTO corotask.type_controls (task_type, paused_at, paused_by) VALUES ('held', now(), 'ops')`)
	c.exec(`INSERT INTO corotask.type_controls (task_type, max_running) VALUES ('capped', 1)`)
	paused := c.create("--type", "held")
	running := c.create("--type", "capped")
	c.exec(`UPDATE corotask.tasks SET claim = gen_random_uuid(), heartbeat = now(), claim_expires_at = now() + interval '1 hour',
		counted = true WHERE task_id = $1`, running)
	limited := c.create("--type", "capped")
	ready := c.create("--type", "free")

	requireIDs(t, c.ok("ls", "--status", "paused"), paused)
	requireIDs(t, c.ok("ls", "--status", "limited"), limited)
	requireIDs(t, c.ok("ls", "--status", "ready"), ready)
}
