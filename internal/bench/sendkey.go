package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/tasks"
)

// runSendKey: the cost of inbox.SendToKey, for a key no live task holds
// (it creates the task, with the message in its inbox) and for a key whose
// task exists (it finds the task and sends), beside inbox.Send to a known
// ID. N/2 calls of each keyed kind and N/2 plain sends, interleaved (a new
// key, an existing key, an ID, and again) so that all three see the same
// table and machine; each call its own autocommit statement on one
// connection. Every target receives one message only: the existing keys'
// tasks and the sends' tasks are created beforehand, N/2 of each, of a
// type nothing polls, so no inbox grows and no executor competes.
func runSendKey(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	half := o.N / 2
	res.param("calls_per_kind", half)
	db, err := r.pool(ctx, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := r.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	existing := make([]tasks.Spec, half)
	for i := range existing {
		existing[i] = tasks.Spec{Type: unpolledType, Key: "old-" + strconv.Itoa(i)}
	}
	existingIDs, err := createInBatches(ctx, db, existing, r.opts.Batch)
	if err != nil {
		return err
	}
	plainIDs, _, err := r.createTasks(ctx, db, half, tasks.Spec{Type: unpolledType})
	if err != nil {
		return err
	}
	if err := r.analyze(ctx, db); err != nil {
		return err
	}
	for i := range sendWarmup {
		w := note{Seq: -1 - i}
		if _, err := inbox.SendToKey(ctx, conn, unpolledType, "warmup-"+strconv.Itoa(i), w, nil); err != nil {
			return err
		}
		if _, err := inbox.SendToKey(ctx, conn, unpolledType, "warmup-0", w, nil); err != nil {
			return err
		}
		if err := inbox.Send(ctx, conn, plainIDs[0], tasks.ID{}, w); err != nil {
			return err
		}
	}

	r.progress("%d calls of each kind: send_to_key to a new key, to an existing key, send to an ID", half)
	newKey := make([]time.Duration, 0, half)
	oldKey := make([]time.Duration, 0, half)
	byID := make([]time.Duration, 0, half)
	for i := range half {
		msg := note{Seq: i}
		t0 := time.Now()
		if _, err := inbox.SendToKey(ctx, conn, unpolledType, "new-"+strconv.Itoa(i), msg, nil); err != nil {
			return err
		}
		t1 := time.Now()
		id, err := inbox.SendToKey(ctx, conn, unpolledType, existing[i].Key, msg, nil)
		if err != nil {
			return err
		}
		t2 := time.Now()
		if err := inbox.Send(ctx, conn, plainIDs[i], tasks.ID{}, msg); err != nil {
			return err
		}
		t3 := time.Now()
		if id != existingIDs[i] {
			return fmt.Errorf("send_to_key %q reached task %s, want the existing %s", existing[i].Key, id, existingIDs[i])
		}
		newKey, oldKey, byID = append(newKey, t1.Sub(t0)), append(oldKey, t2.Sub(t1)), append(byID, t3.Sub(t2))
	}

	var created int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM corotask.tasks WHERE task_key LIKE 'new-%'").Scan(&created); err != nil {
		return fmt.Errorf("count the tasks created by key: %w", err)
	}
	if created != half {
		return fmt.Errorf("send_to_key to %d new keys created %d tasks", half, created)
	}
	means := map[string]float64{}
	for _, k := range []struct {
		name string
		ds   []time.Duration
	}{{"new_key", newKey}, {"existing_key", oldKey}, {"send_id", byID}} {
		p := percentiles(k.ds, 50, 99)
		means[k.name] = mean(k.ds)
		res.metric(k.name+"_mean_ms", means[k.name])
		res.metric(k.name+"_p50_ms", p[0])
		res.metric(k.name+"_p99_ms", p[1])
	}
	res.metric("new_key_vs_send_id", means["new_key"]/means["send_id"])
	res.metric("existing_key_vs_send_id", means["existing_key"]/means["send_id"])
	r.progress("mean per call: new key %.3f ms, existing key %.3f ms, send to an ID %.3f ms",
		means["new_key"], means["existing_key"], means["send_id"])
	res.note("new_key: inbox.SendToKey for a key no task holds (creates the task with the message); existing_key: for a key whose task exists; send_id: inbox.Send to a known ID; %d timed calls of each, interleaved, each its own autocommit statement on one connection, after %d untimed", half, sendWarmup)
	res.note("*_vs_send_id = the kind's mean over send_id's; every target receives one message; the tasks, of a type nothing polls, are %d before the timed calls and one more per new key", 2*half+sendWarmup)
	return nil
}

// createInBatches creates specs with CreateMany, batch at a time, and
// returns their IDs in order.
func createInBatches(ctx context.Context, db tasks.DB, specs []tasks.Spec, batch int) ([]tasks.ID, error) {
	ids := make([]tasks.ID, 0, len(specs))
	for len(ids) < len(specs) {
		got, err := tasks.CreateMany(ctx, db, specs[len(ids):min(len(ids)+batch, len(specs))])
		if err != nil {
			return nil, err
		}
		ids = append(ids, got...)
	}
	return ids, nil
}
