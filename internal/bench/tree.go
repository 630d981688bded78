package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

const treeType tasks.Type = "bench.tree"

// treeState is a node of the tree: fib(N), or a kary node with Depth levels
// below it.
type treeState struct {
	Kary    bool  `json:"kary,omitempty"`
	N       int   `json:"n"` // fib: the argument; kary: depth left
	K       int   `json:"k,omitempty"`
	Spawned bool  `json:"spawned,omitempty"`
	Pending int   `json:"pending,omitempty"`
	Sum     int64 `json:"sum,omitempty"`
}

// treePoller spawns the node's children, then sums their results as their
// completion messages arrive: fib(n) = fib(n-1) + fib(n-2), and a kary node's
// result is the number of nodes of its subtree.
func treePoller(polls *atomic.Int64, wait executor.Action) executor.PollerFunc[treeState, int64] {
	return func(ctx context.Context, t *executor.Task[treeState, int64]) (executor.Action, error) {
		polls.Add(1)
		s := &t.State
		if !s.Spawned {
			s.Spawned = true
			switch {
			case !s.Kary && s.N < 2:
				return executor.DoneWith(s.N), nil
			case s.Kary && s.N == 0:
				return executor.DoneWith(1), nil
			case !s.Kary:
				t.Spawn(treeType, treeState{N: s.N - 1}, nil)
				t.Spawn(treeType, treeState{N: s.N - 2}, nil)
				s.Pending = 2
			default:
				for range s.K {
					t.Spawn(treeType, treeState{Kary: true, N: s.N - 1, K: s.K}, nil)
				}
				s.Pending = s.K
			}
			return wait, nil
		}
		for {
			m, ok := t.Inbox.Pop()
			if !ok {
				break
			}
			if !m.Done || m.Err != "" {
				return executor.Action{}, fmt.Errorf("tree: unexpected message %+v", m)
			}
			s.Sum += m.Body
			s.Pending--
		}
		if s.Pending > 0 {
			return wait, nil
		}
		if s.Kary {
			s.Sum++
		}
		return executor.DoneWith(s.Sum), nil
	}
}

func fib(n int) int64 {
	a, b := int64(0), int64(1)
	for range n {
		a, b = b, a+b
	}
	return a
}

// treeSize is the number of tasks of the tree.
func treeSize(kary bool, n, k int) int {
	if kary {
		size, level := 0, 1
		for range n + 1 {
			size += level
			level *= k
		}
		return size
	}
	// T(n) = 1 + T(n-1) + T(n-2), T(0) = T(1) = 1: 2 fib(n+1) - 1.
	return int(2*fib(n+1) - 1)
}

// runTree: a tree of tasks, each spawning its children and summing their
// results; tasks/s and wall time from the root's creation to its commit.
func runTree(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	kary := o.Shape == "kary"
	root := treeState{N: o.N}
	want := fib(o.N)
	if kary {
		root = treeState{Kary: true, N: o.Depth, K: o.K}
		res.param("shape", "kary")
		res.param("k", o.K)
		res.param("depth", o.Depth)
	} else {
		if o.N > 30 {
			return fmt.Errorf("fib(%d) makes too many tasks; use -n 30 or less", o.N)
		}
		res.param("shape", "fib")
		res.param("n", o.N)
	}
	size := treeSize(kary, root.N, root.K)
	if kary {
		want = int64(size)
	}
	res.param("tasks", size)
	res.param("wait", o.Wait)
	res.param("eager", !o.NoEager)
	res.param("workers", o.Workers)
	res.param("pool", o.Pool)

	db, err := r.pool(ctx, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	var polls atomic.Int64
	grp, err := r.startExecutors(ctx, 1, o.Workers, r.executorConfig(0), func(e *executor.Executor) {
		executor.Register(e, treeType, treePoller(&polls, r.waitAction()), r.typeOptions()...)
	})
	if err != nil {
		return err
	}
	defer grp.cleanup()
	stats0, err := readTableStats(ctx, db)
	if err != nil {
		return err
	}
	r.progress("running a %s tree of %d tasks", o.Shape, size)
	cpu0 := sampleCPU(ctx, db)
	start := time.Now()
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: treeType, State: root})
	if err != nil {
		return err
	}
	var task *tasks.Task
	err = waitUntil(ctx, "the root to be done", max(2*time.Minute, time.Duration(size)*2*time.Millisecond), 50*time.Millisecond, func() (bool, error) {
		var err error
		task, err = tasks.Get(ctx, db, id)
		return err == nil && task.Status.Ended(), err
	})
	cpu1 := sampleCPU(ctx, db)
	if err != nil {
		return err
	}
	if err := grp.stop(); err != nil {
		return err
	}
	stats1, err := readTableStats(ctx, db)
	if err != nil {
		return err
	}
	if task.Status != tasks.StatusDone || string(task.Result) != fmt.Sprint(want) {
		return fmt.Errorf("root ended %s with %s, want done with %d", task.Status, task.Result, want)
	}
	elapsed := task.DoneAt.Sub(start)
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM corotask.tasks WHERE outcome = 'done'").Scan(&n); err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%d tasks done, want %d", n, size)
	}
	res.metric("tasks_done", n)
	res.metric("polls", polls.Load())
	res.metric("wall_sec", elapsed.Seconds())
	res.metric("tasks_per_sec", rate(n, elapsed))
	res.metric("polls_per_sec", rate(int(polls.Load()), elapsed))
	addTableStats(res, stats0, stats1)
	u := cpu0.until(cpu1)
	res.metric("executor_cpu_us_per_task", float64(u.self.Microseconds())/float64(n))
	if u.pgOK {
		res.metric("postgres_cpu_us_per_task", float64(u.postgres.Microseconds())/float64(n))
	}
	if u.ok {
		res.metric("machine_cpu_busy_pct", 100*u.busy)
	}
	if o.Wait == "suspend" {
		res.note("wall_sec runs from the root's Create to its done_at; each parent is polled once to spawn and once per completion, or batch of completions (Suspend)")
	} else {
		res.note("wall_sec runs from the root's Create to its done_at; each parent is polled once to spawn and once when its last child has ended (AwaitChildren)")
	}
	return nil
}
