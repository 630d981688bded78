package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/tasks"
)

// listenHeld is how long a LISTEN connection must have lasted for its loss
// to count as a new one (see listen): sessions killed twice a second last
// about 250 ms on average.
const listenHeld = 50 * time.Millisecond

// listenProbeTimeout bounds checkListen's wait for its notification: a last
// resort, since the notification arrives within milliseconds when LISTEN
// works, and is there before the reply to the statement that follows it.
const listenProbeTimeout = 30 * time.Second

// checkListen makes sure, at Run start, that a notification sent through the
// pool reaches a connection that LISTENs, as the executor's notifications
// must: behind a pooler in transaction or statement mode (PgBouncer), LISTEN
// holds on a server connection the listener does not keep, and the
// notification goes to whichever client has that server connection then, or
// nowhere. It listens on a channel of its own, so that no other executor's
// probe is heard. What it cannot find out (the database is down) is logged
// and left to the listen loop's retries.
func (e *Executor) checkListen(ctx context.Context, timeout time.Duration) error {
	heard, err := probeListen(ctx, e.pool, timeout)
	switch {
	case err == nil && !heard:
		return fmt.Errorf("executor: %w: a notification sent through the pool did not arrive within %s; behind PgBouncer in transaction mode set Config.DisableListen", ErrListenUnreachable, timeout)
	case err != nil && ctx.Err() != nil:
		return nil // Run is stopping already
	case err != nil:
		e.log.Warn("corotask: could not check that LISTEN/NOTIFY reaches this executor; going on", "error", err)
	}
	return nil
}

// listen holds one connection that LISTENs for ready tasks (corotask_ready,
// payload: the task type) and canceled tasks (corotask_cancel, payload: the
// task id), and reacts at once. It reconnects at once after its connection
// was severed (see dberr.Severed), else with backoff: while it is away, ready
// tasks are found only every PollInterval.
func (e *Executor) listen(ctx context.Context) {
	severed := 0
	for attempt := 1; ctx.Err() == nil; attempt++ {
		began := time.Now()
		heard, err := e.listenConn(ctx)
		if ctx.Err() != nil {
			return
		}
		if heard {
			attempt = 1
			if time.Since(began) >= listenHeld {
				// Reconnected at once again. A server or proxy that ends
				// every session right after LISTEN runs out of these, and
				// is then reconnected to after the shortest backoff.
				severed = 0
			}
		}
		if e.atOnce(err, severed+1) {
			severed++
			e.log.Warn("corotask: LISTEN connection severed; reconnecting at once", "error", err)
			continue
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
	if e.schema.listenConns.Add(1) > 1 { // the first: Run checked at start
		if err := e.recheckSchema(ctx, pc); err != nil {
			return false, err
		}
	}
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

// probeListen LISTENs on a connection of pool, sends a notification
// through pool, and waits up to timeout for it; heard reports whether it
// came.
func probeListen(ctx context.Context, pool *pgxpool.Pool, timeout time.Duration) (heard bool, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	pc := conn.Hijack()
	defer pc.Close(context.WithoutCancel(ctx))
	channel := "corotask_probe_" + randomHex()
	payload := randomHex()
	if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return false, err
	}
	if _, err := pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		return false, err
	}
	// A session that LISTENs has a notification committed before its next
	// statement by the reply to it: this one makes the notification arrive
	// at once where LISTEN works (pgx keeps it for WaitForNotification).
	if _, err := pc.Exec(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol); err != nil {
		return false, err
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		n, err := pc.WaitForNotification(wait)
		switch {
		case err != nil && ctx.Err() == nil && wait.Err() != nil:
			return false, nil
		case err != nil:
			return false, err
		case n.Channel == channel && n.Payload == payload:
			return true, nil
		}
	}
}
