package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/tasks"
)

const pongType tasks.Type = "bench.pong"

// ping is the message pingpong sends: when it was sent, by this process's
// clock.
type ping struct {
	Seq      int   `json:"seq"`
	SentNano int64 `json:"sent"`
}

// seen is what the pong poller reports of each poll.
type seen struct {
	start time.Time // when the poll started
	msgs  []ping
}

// runPingPong: N messages, one at a time, to a suspended task; latency
// from the call to inbox.Send to the start of the poll that sees the
// message.
func runPingPong(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	res.param("round_trips", o.N)
	res.param("gap", o.Gap)
	db, err := r.pool(ctx, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	polls := make(chan seen, 16)
	poller := executor.PollerFunc[struct{}, ping](func(ctx context.Context, t *executor.Task[struct{}, ping]) (executor.Action, error) {
		s := seen{start: time.Now()}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			s.msgs = append(s.msgs, m.Body)
		}
		select {
		case polls <- s:
		default: // the client is not listening (an extra poll)
		}
		return executor.Suspend(), nil
	})
	grp, err := r.startExecutors(ctx, 1, o.Workers, r.executorConfig(0), func(e *executor.Executor) {
		executor.Register(e, pongType, poller, r.typeOptions()...)
	})
	if err != nil {
		return err
	}
	defer grp.cleanup()

	id, err := tasks.Create(ctx, db, tasks.Spec{Type: pongType})
	if err != nil {
		return err
	}
	idle := func() error {
		// Until the last poll has committed: the task is suspended again.
		return waitUntil(ctx, "the pong task to suspend", time.Minute, 100*time.Microsecond, func() (bool, error) {
			var suspended bool
			err := db.QueryRow(ctx, `SELECT claim IS NULL AND wake_at IS NULL
				FROM corotask.tasks WHERE task_id = $1`, id).Scan(&suspended)
			return suspended, err
		})
	}
	select { // its first poll, which suspends it
	case <-polls:
	case <-time.After(time.Minute):
		return fmt.Errorf("the pong task was not polled")
	case <-ctx.Done():
		return ctx.Err()
	}
	r.progress("%d round trips", o.N)
	var lat, send, wake []time.Duration
	cpu0 := sampleCPU(ctx, db)
	start := time.Now()
	for i := range o.N {
		if err := idle(); err != nil {
			return err
		}
		if o.Gap > 0 {
			time.Sleep(o.Gap)
		}
		t0 := time.Now()
		if err := inbox.Send(ctx, db, id, tasks.ID{}, ping{Seq: i, SentNano: t0.UnixNano()}); err != nil {
			return err
		}
		t1 := time.Now()
		var s seen
		select {
		case s = <-polls:
		case <-time.After(time.Minute):
			return fmt.Errorf("message %d was not seen within a minute", i)
		case <-ctx.Done():
			return ctx.Err()
		}
		if len(s.msgs) != 1 || s.msgs[0].Seq != i {
			return fmt.Errorf("round trip %d: the poll saw %+v", i, s.msgs)
		}
		sent := time.Unix(0, s.msgs[0].SentNano)
		lat = append(lat, s.start.Sub(sent))
		send = append(send, t1.Sub(t0))
		wake = append(wake, s.start.Sub(t1))
	}
	elapsed := time.Since(start)
	u := cpu0.until(sampleCPU(ctx, db))
	if err := grp.stop(); err != nil {
		return err
	}
	p := percentiles(lat, 50, 90, 99, 100)
	res.metric("p50_ms", p[0])
	res.metric("p90_ms", p[1])
	res.metric("p99_ms", p[2])
	res.metric("max_ms", p[3])
	res.metric("mean_ms", mean(lat))
	ps := percentiles(send, 50, 99)
	res.metric("send_p50_ms", ps[0])
	res.metric("send_p99_ms", ps[1])
	pw := percentiles(wake, 50, 99)
	res.metric("wake_p50_ms", pw[0])
	res.metric("wake_p99_ms", pw[1])
	res.metric("round_trips_per_sec", rate(o.N, elapsed))
	if u.ok {
		res.metric("machine_cpu_busy_pct", 100*u.busy)
	}
	res.note("latency = start of the poll that sees the message - the time taken just before inbox.Send (one clock); send_* is inbox.Send's own time (its commit), wake_* the rest (NOTIFY, claim, decode)")
	res.note("before each send the client waits until the previous poll has committed, then -gap, so each message finds an idle executor")
	return nil
}
