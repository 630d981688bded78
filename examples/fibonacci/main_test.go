package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	_ "github.com/corotask/corotask/internal/testexit" // no race detector pause at exit
	"github.com/corotask/corotask/tasks"
)

// TestMain runs more tests at once than there are CPUs: they spend their time
// waiting for the database.
func TestMain(m *testing.M) {
	os.Exit(corotasktest.Main(m, 8))
}

var resultLine = regexp.MustCompile(`(?m)^fib\((\d+)\) = (\d+) in \S+ \((\d+) tasks, \d+ tasks/s\)$`)
var rootLine = regexp.MustCompile(`(?m)^root task (\S+) computes fib\((\d+)\)$`)

// checkRun checks what a run that computed fib(n) printed and left in the
// database, and returns the root task's ID.
func checkRun(t *testing.T, db tasks.DB, out string, n int) tasks.ID {
	t.Helper()
	m := rootLine.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Equal(t, strconv.Itoa(n), m[2])
	root, err := tasks.ParseID(m[1])
	require.NoError(t, err)

	m = resultLine.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Equal(t, strconv.Itoa(n), m[1])
	require.Equal(t, strconv.Itoa(fib(n)), m[2])
	require.Equal(t, strconv.Itoa(taskCount(n)), m[3])

	// The tree in the database: every task done, and as many as printed.
	var count, done int
	require.NoError(t, db.QueryRow(context.Background(), `
		WITH RECURSIVE tree AS (
			SELECT task_id, outcome FROM corotask.tasks WHERE task_id = $1
			UNION ALL
			SELECT c.task_id, c.outcome FROM corotask.tasks c JOIN tree ON c.parent_id = tree.task_id
		)
		SELECT count(*), count(*) FILTER (WHERE outcome = 'done') FROM tree`, root).Scan(&count, &done))
	require.Equal(t, taskCount(n), count)
	require.Equal(t, count, done)

	task, err := tasks.Get(context.Background(), db, root)
	require.NoError(t, err)
	var res fibResult
	require.NoError(t, json.Unmarshal(task.Result, &res))
	require.Equal(t, fibResult{Value: fib(n), Tasks: taskCount(n)}, res)
	return root
}

func fib(n int) int {
	a, b := 0, 1
	for range n {
		a, b = b, a+b
	}
	return a
}

func TestTaskCount(t *testing.T) {
	t.Parallel()
	require.Equal(t, 1, taskCount(0))
	require.Equal(t, 1, taskCount(1))
	require.Equal(t, 3, taskCount(2))
	require.Equal(t, 177, taskCount(10))
	require.Equal(t, 21891, taskCount(20))
}

func TestAllInOneProcess(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ n, workers, executors int }{
		{0, 1, 1},
		{1, 1, 1},
		{11, 8, 1},
		{10, 4, 3},
	} {
		t.Run(fmt.Sprintf("n=%d,workers=%d,executors=%d", c.n, c.workers, c.executors), func(t *testing.T) {
			t.Parallel()
			db := corotasktest.NewDB(t)
			var out bytes.Buffer
			err := run(context.Background(), config{
				DatabaseURL: db.Config().ConnString(), N: c.n, Role: "all", Workers: c.workers, Executors: c.executors, Logger: corotasktest.Logger(t),
			}, &out)
			require.NoError(t, err)
			checkRun(t, db, out.String(), c.n)
			if c.executors > 1 {
				require.Regexp(t, `(?m)^polls by executor: \[\d+( \d+){2}\]$`, out.String())
			}
		})
	}
}

// Two worker processes and a submitter, as in the package documentation,
// here as three runs in one test process.
func TestWorkersAndSubmit(t *testing.T) {
	t.Parallel()
	db := corotasktest.NewDB(t)
	url := db.Config().ConnString()
	ctx, stopWorkers := context.WithCancel(context.Background())
	defer stopWorkers()
	const workers = 2
	var (
		wg   sync.WaitGroup
		outs [workers]bytes.Buffer
		errs [workers]error
	)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = run(ctx, config{DatabaseURL: url, Role: "work", Workers: 4, Executors: 1, Logger: corotasktest.Logger(t)}, &outs[i])
		}()
	}

	var out bytes.Buffer
	require.NoError(t, run(context.Background(), config{
		DatabaseURL: url, N: 12, Role: "submit", Workers: 1, Executors: 1, Logger: corotasktest.Logger(t),
	}, &out))
	require.Contains(t, out.String(), "waiting for executors: run `go run ./examples/fibonacci -role work` in other terminals\n")
	checkRun(t, db, out.String(), 12)

	stopWorkers()
	wg.Wait()
	total := 0
	for i := range workers {
		require.NoError(t, errs[i])
		require.Contains(t, outs[i].String(), "working on fibonacci.fib tasks (1 executor, 4 workers each); Ctrl-C to stop\n")
		m := regexp.MustCompile(`(?m)^stopped after (\d+) polls$`).FindStringSubmatch(outs[i].String())
		require.NotNil(t, m, outs[i].String())
		polls, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		total += polls
	}
	// Each task is polled at least once, and parents once more at least.
	require.GreaterOrEqual(t, total, taskCount(12)+(taskCount(12)-1)/2)
}

// The poller, one poll at a time: what each poll would commit, without a
// database.
func tryPoll(t *testing.T, state fibState, msgs ...inbox.Message[fibResult]) (executor.TryResult[fibState], error) {
	t.Helper()
	p := &fibPoller{log: corotasktest.Logger(t)}
	return executor.TryPoll(context.Background(), p, executor.TryInput[fibState, fibResult]{Type: fibType, State: state, Messages: msgs})
}

func TestPollEndsAtOnceForZeroAndOne(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1} {
		res, err := tryPoll(t, fibState{N: n})
		require.NoError(t, err)
		require.Equal(t, executor.DoneWith(fibResult{Value: n, Tasks: 1}), res.Action)
		require.JSONEq(t, fmt.Sprintf(`{"value": %d, "tasks": 1}`, n), string(res.Result))
		require.Empty(t, res.Spawns)
	}
}

func TestPollFansOut(t *testing.T) {
	t.Parallel()
	res, err := tryPoll(t, fibState{N: 5})
	require.NoError(t, err)
	require.Equal(t, executor.AwaitChildren(), res.Action)
	require.Equal(t, fibState{N: 5, Spawned: true, Pending: 2, Tasks: 1}, res.State)
	require.Len(t, res.Spawns, 2)
	for i, n := range []int{4, 3} {
		require.Equal(t, fibType, res.Spawns[i].Type)
		require.JSONEq(t, fmt.Sprintf(`{"n": %d}`, n), string(res.Spawns[i].State))
		require.Nil(t, res.Spawns[i].Message)
	}
}

// The children's completions arrive in any order, together or apart.
func TestPollFansIn(t *testing.T) {
	t.Parallel()
	waiting := fibState{N: 5, Spawned: true, Pending: 2, Tasks: 1}
	four := inbox.Message[fibResult]{From: tasks.NewID(), Done: true, Body: fibResult{Value: 3, Tasks: 9}}
	three := inbox.Message[fibResult]{From: tasks.NewID(), Done: true, Body: fibResult{Value: 2, Tasks: 5}}
	want := executor.DoneWith(fibResult{Value: 5, Tasks: 15})

	res, err := tryPoll(t, waiting, three)
	require.NoError(t, err)
	require.Equal(t, executor.AwaitChildren(), res.Action, "one child is still running")
	require.Equal(t, fibState{N: 5, Spawned: true, Pending: 1, Value: 2, Tasks: 6}, res.State)
	require.Equal(t, 1, res.Popped)
	res, err = tryPoll(t, res.State, four)
	require.NoError(t, err)
	require.Equal(t, want, res.Action)
	require.JSONEq(t, `{"value": 5, "tasks": 15}`, string(res.Result))

	res, err = tryPoll(t, waiting, four, three)
	require.NoError(t, err)
	require.Equal(t, want, res.Action)
	require.Equal(t, 2, res.Popped)
}

// A message that is not a completion is dropped; a child that ended
// without a result fails the poll.
func TestPollOtherMessages(t *testing.T) {
	t.Parallel()
	waiting := fibState{N: 5, Spawned: true, Pending: 2, Tasks: 1}
	res, err := tryPoll(t, waiting, inbox.Message[fibResult]{Body: fibResult{Value: 100}})
	require.NoError(t, err)
	require.Equal(t, executor.AwaitChildren(), res.Action)
	require.Equal(t, waiting, res.State)
	require.Equal(t, 1, res.Popped)

	child := tasks.NewID()
	_, err = tryPoll(t, waiting, inbox.Message[fibResult]{From: child, Done: true, Err: "canceled"})
	require.EqualError(t, err, "fib(5): child "+child.String()+" ended without a result: canceled")
}

// The whole tree, polled one task after another until nothing is ready.
func TestWholeTree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := corotasktest.NewDB(t)
	e, p := newExecutor(db, config{Workers: 16}, corotasktest.Logger(t))
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: fibType, State: fibState{N: 10}})
	require.NoError(t, err)

	n, err := corotasktest.RunUntilIdle(ctx, e)
	require.NoError(t, err)
	parents := (taskCount(10) - 1) / 2
	require.Equal(t, taskCount(10)+parents, n, "each task once, each parent once more for its fan-in")
	require.EqualValues(t, n, p.polls.Load())
	require.Equal(t, fibResult{Value: fib(10), Tasks: taskCount(10)}, corotasktest.Result[fibResult](t, db, root))
}

// A child that ends without a result (here: canceled) fails its parent, and
// the failure goes up to the root.
func TestCanceledChildFailsTheTree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := corotasktest.NewDB(t)
	e, _ := newExecutor(db, config{Workers: 10}, corotasktest.Logger(t))
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: fibType, State: fibState{N: 3}})
	require.NoError(t, err)
	n, err := e.PollOnce(ctx) // the root spawns fib(2) and fib(1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	kids, err := tasks.List(ctx, db, tasks.Filter{Parent: root})
	require.NoError(t, err)
	require.Len(t, kids, 2)
	var two tasks.ID
	for _, k := range kids {
		if corotasktest.State[fibState](t, db, k.ID).N == 2 {
			two = k.ID
		}
	}
	require.NoError(t, tasks.Cancel(ctx, db, two))

	// The root sees fib(2)'s cancellation, and fails at once (MaxFailures(1)).
	n, err = corotasktest.RunUntilIdle(ctx, e)
	require.ErrorContains(t, err, "fib(3): child "+two.String()+" ended without a result: canceled")
	require.Equal(t, 2, n, "the root and fib(1)")
	task, err := tasks.Get(ctx, db, root)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusFailed, task.Status)
	require.Contains(t, task.LastError, "ended without a result: canceled")

	// Nothing is left to poll: the failure ended the tree.
	n, err = corotasktest.RunUntilIdle(ctx, e)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestBadFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  config
		want string
	}{
		{config{N: -1, Role: "all", Workers: 1, Executors: 1}, "-n -1: want 0 to 30 (fib(30) already makes 2692537 tasks)"},
		{config{N: 31, Role: "all", Workers: 1, Executors: 1}, "-n 31: want 0 to 30 (fib(30) already makes 2692537 tasks)"},
		{config{N: 5, Role: "all", Workers: 0, Executors: 1}, "-workers and -executors must be at least 1"},
		{config{N: 5, Role: "boss", Workers: 1, Executors: 1}, `-role "boss": want all, work or submit`},
	} {
		err := run(context.Background(), c.cfg, &bytes.Buffer{})
		require.EqualError(t, err, c.want)
	}
}
