package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

const (
	faninParentType tasks.Type = "bench.fanin.parent"
	faninChildType  tasks.Type = "bench.fanin.child"
)

type faninState struct {
	K       int   `json:"k"`
	Spawned bool  `json:"spawned,omitempty"`
	Got     int   `json:"got,omitempty"`
	Sum     int64 `json:"sum,omitempty"`
}

// faninTimes is what the pollers note, by this process's clock.
type faninTimes struct {
	firstChild  firstTime
	childPolls  atomic.Int64
	parentPolls atomic.Int64
	all         chan time.Time // the start of the parent poll that has all K
}

// runFanin: a parent spawns K children in one poll; each child ends at its
// first poll with its index as result; the parent sums the results. Time
// from the parent's creation to the start of its poll that has all K.
func runFanin(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	res.param("k", o.K)
	res.param("wait", o.Wait)
	res.param("eager", !o.NoEager)
	res.param("workers", o.Workers)
	res.param("pool", o.Pool)
	db, err := r.pool(ctx, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	ft := &faninTimes{all: make(chan time.Time, 1)}
	wait := r.waitAction()
	parent := executor.PollerFunc[faninState, int64](func(ctx context.Context, t *executor.Task[faninState, int64]) (executor.Action, error) {
		start := time.Now()
		ft.parentPolls.Add(1)
		s := &t.State
		if !s.Spawned {
			for i := range s.K {
				t.Spawn(faninChildType, i, nil)
			}
			s.Spawned = true
			return wait, nil
		}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			if !m.Done || m.Err != "" {
				return executor.Action{}, fmt.Errorf("fanin: unexpected message %+v", m)
			}
			s.Got++
			s.Sum += m.Body
		}
		if s.Got < s.K {
			return wait, nil
		}
		select {
		case ft.all <- start:
		default:
		}
		return executor.DoneWith(s.Sum), nil
	})
	child := executor.PollerFunc[int64, struct{}](func(ctx context.Context, t *executor.Task[int64, struct{}]) (executor.Action, error) {
		if ft.childPolls.Add(1) == 1 {
			ft.firstChild.see(time.Now())
		}
		return executor.DoneWith(t.State), nil
	})
	grp, err := r.startExecutors(ctx, 1, o.Workers, r.executorConfig(0), func(e *executor.Executor) {
		executor.Register(e, faninParentType, parent, r.typeOptions()...)
		executor.Register(e, faninChildType, child, r.typeOptions()...)
	})
	if err != nil {
		return err
	}
	defer grp.cleanup()
	r.progress("one parent, %d children", o.K)
	cpu0 := sampleCPU(ctx, db)
	start := time.Now()
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: faninParentType, State: faninState{K: o.K}})
	if err != nil {
		return err
	}
	var all time.Time
	select {
	case all = <-ft.all:
	case <-time.After(max(time.Minute, time.Duration(o.K)*5*time.Millisecond)):
		return fmt.Errorf("the parent did not get its %d results (%d child polls)", o.K, ft.childPolls.Load())
	case <-ctx.Done():
		return ctx.Err()
	}
	u := cpu0.until(sampleCPU(ctx, db))
	var task *tasks.Task
	err = waitUntil(ctx, "the parent to be done", time.Minute, 10*time.Millisecond, func() (bool, error) {
		var err error
		task, err = tasks.Get(ctx, db, id)
		return err == nil && task.Status.Ended(), err
	})
	if err != nil {
		return err
	}
	if err := grp.stop(); err != nil {
		return err
	}
	want := int64(o.K) * int64(o.K-1) / 2
	if task.Status != tasks.StatusDone || string(task.Result) != fmt.Sprint(want) {
		return fmt.Errorf("parent ended %s with %s, want done with %d", task.Status, task.Result, want)
	}
	first := ft.firstChild.get()
	res.metric("results_delivered", o.K)
	res.metric("total_ms", ms(all.Sub(start)))
	res.metric("children_ms", ms(all.Sub(first)))
	res.metric("spawn_ms", ms(first.Sub(start)))
	res.metric("parent_polls", ft.parentPolls.Load())
	res.metric("child_polls", ft.childPolls.Load())
	res.metric("children_per_sec", rate(o.K, all.Sub(first)))
	if u.pgOK {
		res.metric("postgres_cpu_sec", u.postgres.Seconds())
	}
	if u.ok {
		res.metric("machine_cpu_busy_pct", 100*u.busy)
	}
	res.note("total_ms: from the parent's Create to the start of its poll that has all K results; spawn_ms: to the first child's poll (the parent's poll and its commit creating K children); children_ms: the rest")
	return nil
}
