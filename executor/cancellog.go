package executor

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/corotask/corotask/tasks"
)

// cancelLogDelay is how long the polls stopped by cancels are gathered into
// one log line: an operator's cancel of a tree reaches its running polls
// within moments of each other (one notification each, or one renewal).
const cancelLogDelay = time.Second

// cancelLogIDs is how many of the stopped polls' tasks the line names.
const cancelLogIDs = 5

// canceledPolls reports the polls stopped because their tasks were canceled
// in one Info line per burst ("corotask: 300 polls stopped: their tasks were
// canceled"), rather than one line per poll: a cancel is an operator's
// decision, not a fault.
type canceledPolls struct {
	log *slog.Logger

	mu      sync.Mutex
	n       int
	ids     []tasks.ID // the first cancelLogIDs
	pending bool       // a line is due at the end of the burst
}

// add counts the poll of task id, stopped by its task's cancel.
func (c *canceledPolls) add(id tasks.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if len(c.ids) < cancelLogIDs {
		c.ids = append(c.ids, id)
	}
	if !c.pending {
		c.pending = true
		time.AfterFunc(cancelLogDelay, c.flush)
	}
}

// flush logs the polls gathered since the last line; Run calls it as it
// stops, so that no line comes after it returns.
func (c *canceledPolls) flush() {
	c.mu.Lock()
	n, ids := c.n, c.ids
	c.n, c.ids, c.pending = 0, nil, false
	c.mu.Unlock()
	if n == 0 {
		return
	}
	noun := "polls"
	if n == 1 {
		noun = "poll"
	}
	c.log.Info(fmt.Sprintf("corotask: %d %s stopped: their tasks were canceled", n, noun), "polls", n, "tasks", ids)
}
