package executor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/query"

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

// listener holds the LISTEN connection (see run), in a goroutine of its own
// (a service of Run's). It owns that connection and ready, which it closes
// once LISTEN is first in place; it wakes the claim loop, and has the polls
// cancel the poll of a canceled task.
type listener struct {
	*env
	polls *polls
	// ready is closed once LISTEN is in place, so that the first claim
	// misses no notification.
	ready chan struct{}
	once  sync.Once
}

// checkListen makes sure, at Run start, that a notification sent through the
// pool reaches a connection that LISTENs, as the executor's notifications
// must: behind a pooler in transaction or statement mode (PgBouncer), LISTEN
// holds on a server connection the listener does not keep, and the
// notification goes to whichever client has that server connection then, or
// nowhere. It listens on a channel of its own, so that no other executor's
// probe is heard. What it cannot find out (the database is down) is logged
// and left to the listen loop's retries.
func checkListen(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, timeout time.Duration) error {
	heard, err := probeListen(ctx, pool, timeout)
	switch {
	case err == nil && !heard:
		return fmt.Errorf("executor: %w: a notification sent through the pool did not arrive within %s; behind PgBouncer in transaction mode set Config.DisableListen", ErrListenUnreachable, timeout)
	case err != nil && ctx.Err() != nil:
		return nil // Run is stopping already
	case err != nil:
		log.Warn("corotask: could not check that LISTEN/NOTIFY reaches this executor; going on", "error", err)
	}
	return nil
}

// run holds one connection that LISTENs for ready tasks (corotask_ready,
// payload: the task type) and canceled tasks (corotask_cancel, payload: the
// task id), and reacts at once. It reconnects at once after its connection
// was severed (see dberr.Severed), else with backoff: while it is away, ready
// tasks are found only every PollInterval.
func (l *listener) run(ctx context.Context) {
	severed := 0
	for attempt := 1; ctx.Err() == nil; attempt++ {
		began := time.Now()
		heard, err := l.listenConn(ctx)
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
		if l.atOnce(err, severed+1) {
			severed++
			l.log.Warn("corotask: LISTEN connection severed; reconnecting at once", "error", err)
			continue
		}
		d := backoff(100*time.Millisecond, 10*time.Second, attempt)
		l.log.Warn("corotask: LISTEN connection lost; reconnecting", "error", err, "retry_in", d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// listenConn listens until an error; heard reports whether it got going.
func (l *listener) listenConn(ctx context.Context) (heard bool, err error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	// The connection is never returned to the pool: it holds LISTEN state and
	// may be broken by a canceled wait.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if l.schema.listenConns.Add(1) > 1 { // the first: Run checked at start
		if err := l.schema.recheck(ctx, pc); err != nil {
			return false, err
		}
	}
	if _, err := pc.Exec(ctx, query.ListenChannels); err != nil {
		return false, err
	}
	// Anything announced while we were not listening is found by a claim now.
	l.once.Do(func() { close(l.ready) })
	l.signal()
	l.signalLane()
	registered := map[string]bool{}
	for _, t := range l.pollers.types() {
		registered[string(t)] = true
	}
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		switch n.Channel {
		case "corotask_ready":
			if registered[n.Payload] {
				l.signal()
				l.signalLane()
			}
		case "corotask_cancel":
			if id, err := tasks.ParseID(n.Payload); err == nil {
				l.polls.cancelTask(id)
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
	if _, err := pc.Exec(ctx, query.ListenProbe+pgx.Identifier{channel}.Sanitize()); err != nil {
		return false, err
	}
	if _, err := pool.Exec(ctx, query.ListenProbeNotify, channel, payload); err != nil {
		return false, err
	}
	// A session that LISTENs has a notification committed before its next
	// statement by the reply to it: this one makes the notification arrive
	// at once where LISTEN works (pgx keeps it for WaitForNotification).
	if _, err := pc.Exec(ctx, query.ListenProbeFlush, pgx.QueryExecModeSimpleProtocol); err != nil {
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
