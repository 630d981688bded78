package executor

import (
	"context"
	"time"

	"github.com/corotask/corotask/tasks"
)

// listen holds one connection that LISTENs for ready tasks (corotask_ready,
// payload: the task type) and canceled tasks (corotask_cancel, payload: the
// task id), and reacts at once. It reconnects with backoff after errors.
func (e *Executor) listen(ctx context.Context) {
	for attempt := 1; ctx.Err() == nil; attempt++ {
		heard, err := e.listenConn(ctx)
		if ctx.Err() != nil {
			return
		}
		if heard {
			attempt = 1
		}
		d := backoff(100*time.Millisecond, 10*time.Second, attempt)
		e.log.Warn("corotask: LISTEN connection lost; reconnecting", "error", err, "retry_in", d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// listenOnce listens until an error; heard reports whether it got going.
func (e *Executor) listenConn(ctx context.Context) (heard bool, err error) {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	// The connection is never returned to the pool: it holds LISTEN state and
	// may be broken by a canceled wait.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if _, err := pc.Exec(ctx, "LISTEN corotask_ready; LISTEN corotask_cancel"); err != nil {
		return false, err
	}
	// Anything announced while we were not listening is found by a claim now.
	e.listenOnce.Do(func() { close(e.listening) })
	e.signal()
	e.mu.Lock()
	registered := make(map[string]bool, len(e.handlers))
	for t := range e.handlers {
		registered[string(t)] = true
	}
	e.mu.Unlock()
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		switch n.Channel {
		case "corotask_ready":
			if registered[n.Payload] {
				e.signal()
			}
		case "corotask_cancel":
			if id, err := tasks.ParseID(n.Payload); err == nil {
				e.cancelTask(id)
			}
		}
	}
}
