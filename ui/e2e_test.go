package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
	"github.com/corotask/corotask/ui"
)

// screenshots makes TestBrowser write a PNG of each page to docs/ui/:
//
//	go test ./ui -run TestBrowser -screenshots
var screenshots = flag.Bool("screenshots", false, "write screenshots of the pages to docs/ui/")

// noBrowserEnv, set to 1, lets the browser tests skip when Chromium is not
// installed; without it they fail, so that a machine without Chromium does
// not pass them silently.
const noBrowserEnv = "COROTASK_NO_BROWSER"

// chromium returns the path of the Chromium binary: $COROTASK_CHROMIUM, else
// chromium (Debian's package) or chromium-browser on PATH.
func chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("COROTASK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(noBrowserEnv) == "1" {
		t.Skipf("Chromium is not installed and %s=1: skipping the browser test", noBrowserEnv)
		return ""
	}
	t.Fatalf("Chromium is not installed: install Debian's chromium package (apt-get install chromium), "+
		"or set COROTASK_CHROMIUM to its path; set %s=1 to skip the browser tests", noBrowserEnv)
	return ""
}

// fatalTB records what a test helper reports instead of ending the test.
type fatalTB struct {
	testing.TB
	fatal, skip string
}

func (f *fatalTB) Fatalf(format string, args ...any) { f.fatal = fmt.Sprintf(format, args...) }
func (f *fatalTB) Skipf(format string, args ...any)  { f.skip = fmt.Sprintf(format, args...) }

// Without Chromium the browser tests fail, saying how to install it, unless
// COROTASK_NO_BROWSER=1 says to skip them.
func TestNoChromiumFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("COROTASK_CHROMIUM", "")
	t.Setenv(noBrowserEnv, "")
	f := &fatalTB{TB: t}
	chromium(f)
	require.Contains(t, f.fatal, "Chromium is not installed: install Debian's chromium package (apt-get install chromium)")
	require.Contains(t, f.fatal, "set COROTASK_NO_BROWSER=1 to skip")
	require.Empty(t, f.skip)

	t.Setenv(noBrowserEnv, "1")
	f = &fatalTB{TB: t}
	chromium(f)
	require.Empty(t, f.fatal)
	require.Contains(t, f.skip, "Chromium is not installed and COROTASK_NO_BROWSER=1")
}

// browser starts a headless Chromium for the test and returns a context to
// drive it with. The flags keep it off the network: without them it tries
// to reach Google's services and waits on connections that never answer.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*testdb.Patience) // the whole browser session
	t.Cleanup(func() {
		cancelTimeout()
		cancelBrowser()
		cancelAlloc()
	})
	start := time.Now()
	require.NoError(t, chromedp.Do(ctx), "start Chromium")
	t.Logf("Chromium started in %v", time.Since(start))
	return ctx
}

// workflow is the state of an e2e.workflow task: it spawns an e2e.step
// child every poll, sleeping between them, until a message tells it to
// finish.
type workflow struct {
	Spawned int `json:"spawned"`
	// Finished is the finish message's text, kept so that a poll that
	// returns done but does not end the task (a message arrived meanwhile,
	// here a child's completion) ends it at the next poll.
	Finished string `json:"finished,omitempty"`
	// Last is when the last child was spawned: one is spawned every 250ms,
	// whatever wakes the workflow in between (its children's completions).
	Last time.Time `json:"last,omitzero"`
}

// finish is the message that ends a workflow.
type finish struct {
	Finish string `json:"finish"`
}

func runWorkflows(t *testing.T, ctx context.Context, e *executor.Executor) {
	executor.Register(e, "e2e.workflow", executor.PollerFunc[workflow, json.RawMessage](
		func(ctx context.Context, tk *executor.Task[workflow, json.RawMessage]) (executor.Action, error) {
			for {
				m, ok := tk.Inbox.Pop()
				if !ok {
					break
				}
				var f finish
				if !m.Done && json.Unmarshal(m.Body, &f) == nil && f.Finish != "" {
					tk.State.Finished = f.Finish
				}
			}
			if tk.State.Finished != "" {
				return executor.DoneWith(map[string]any{"finished": tk.State.Finished, "children": tk.State.Spawned}), nil
			}
			if tk.State.Spawned >= 40 {
				return executor.Suspend(), nil
			}
			if next := tk.State.Last.Add(250 * time.Millisecond); time.Now().Before(next) {
				return executor.SleepUntil(next), nil
			}
			tk.State.Spawned++
			tk.State.Last = time.Now()
			tk.Spawn("e2e.step", map[string]int{"n": tk.State.Spawned}, nil)
			return executor.Sleep(250 * time.Millisecond), nil
		}))
	executor.Register(e, "e2e.step", executor.PollerFunc[map[string]int, json.RawMessage](
		func(ctx context.Context, tk *executor.Task[map[string]int, json.RawMessage]) (executor.Action, error) {
			return executor.DoneWith(map[string]int{"square": tk.State["n"] * tk.State["n"]}), nil
		}))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("executor: %v", err)
		}
	})
}

// TestBrowser drives the UI in headless Chromium: from the overview to a
// running workflow, whose tree grows while the page is open, to its page,
// where a message sent from the form ends it.
func TestBrowser(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	site, bctx := serve(t, ui.Config{Pool: pool, RefreshInterval: 100 * time.Millisecond})
	var nested tasks.ID
	if *screenshots {
		nested = seedForScreenshots(t, pool)
	}
	id, err := tasks.Create(ctx, pool, tasks.Spec{Type: "e2e.workflow"})
	require.NoError(t, err)
	// No executor serves e2e.parked: its state is edited on its page.
	parked, err := tasks.Create(ctx, pool, tasks.Spec{Type: "e2e.parked",
		State: map[string]any{"order": 42, "step": "charge", "address": "1 Old Road"}})
	require.NoError(t, err)
	runWorkflows(t, ctx, executor.MustNew(pool, executor.Config{
		PollInterval: 100 * time.Millisecond, Logger: testdb.Logger(t),
	}))

	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if !*screenshots {
				return nil
			}
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join("..", "docs", "ui", name+".png"), png, 0o644)
		})
	}
	// eval evaluates a JavaScript expression into *out (nil: ignored).
	eval := func(expr string, out *any) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			v, err := chromedp.Evaluate[any](expr)(ctx, tg)
			if out != nil {
				*out = v
			}
			return err
		})
	}
	until := untilTrue // see e2e_until_test.go
	const nodes = `document.querySelectorAll(".tree .node").length`
	// mark sets a variable that a reload of the page would clear, so that
	// what changes afterwards was changed in place, live.
	mark := eval(`window.notReloaded = true`, nil)
	var before, after, stillMarked any

	// The overview lists the workflow's type; its tasks list the workflow.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(site+"/"),
		present(`a[href="/tasks?type=e2e.workflow"]`),
		until(`document.querySelector("a[href='/tasks?type=e2e.step&status=done']") !== null`),
		shot("overview"),
		follow(`a[href="/executors"]`, "/executors"),
		present(`a[href="/tasks?type=e2e.workflow"]`), // the executor serves it
		shot("executors"),
		follow(`a[href="/"]`, "/"),
		present(`a[href="/tasks?type=e2e.workflow"]`),
		follow(`a[href="/tasks?type=e2e.workflow"]`, "/tasks?type=e2e.workflow"),
		present(`a[href="/tasks/`+id.String()+`"]`),
		shot("tasks"),
		follow(`a[href="/tasks/`+id.String()+`"]`, "/tasks/"+id.String()),
		present(`#send-body`),
		follow(`a[href="/tasks/`+id.String()+`/tree"]`, "/tasks/"+id.String()+"/tree"),
		present(`.tree`),
	), "from the overview to the workflow's tree")

	// The tree grows while the page stays open.
	require.NoError(t, chromedp.Do(bctx,
		mark,
		eval(nodes, &before),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := until(fmt.Sprintf(`%s >= %v`, nodes, before.(float64)+2))(ctx, tg)
			return err
		}),
		eval(nodes, &after),
		eval(`window.notReloaded === true`, &stillMarked),
		shot("tree"),
	), "the tree grows live")
	if *screenshots {
		require.NoError(t, chromedp.Do(bctx,
			chromedp.Navigate(site+"/tasks/"+nested.String()+"/tree"),
			present(`.tree`),
			shot("tree-nested"),
			chromedp.Navigate(site+"/tasks"),
			present(`table.tasks`),
			shot("tasks-all"),
			chromedp.Navigate(site+"/tasks/"+id.String()+"/tree"),
			present(`.tree`),
		))
	}
	require.Equal(t, true, stillMarked, "the tree changed by a reload, not live")
	require.GreaterOrEqual(t, after.(float64), before.(float64)+2)

	// A message typed in the form, confirmed, ends the workflow, and its page
	// shows it, and the send in the history.
	err = chromedp.Do(bctx,
		follow(`a[href="/tasks/`+id.String()+`"]`, "/tasks/"+id.String()),
		present(`#send-body`),
		chromedp.SendKeys(`#send-body`, `{"finish": "from the`),
		present(`#send-check.bad`), // not JSON yet: the button is off
		chromedp.SendKeys(`#send-body`, ` browser"}`),
		present(`#send-check.ok`),
		shot("task"),
		clickFirst(`form.send button[type=submit]`),
		present(`#confirm`),
		shot("confirm"),
		follow(`#confirm`, "/tasks/"+id.String()+"?done=send"),
		present(`.flash`),
		present(`#live .timeline li.sent-message`),
		mark,
		until(`document.querySelector("#live .facts .s-done") !== null`),
		eval(`window.notReloaded === true`, &stillMarked),
		shot("task-done"),
	)
	if err != nil {
		loc, _ := chromedp.Run(context.WithoutCancel(bctx), chromedp.Location())
		text, _ := chromedp.Run(context.WithoutCancel(bctx), chromedp.Text(`body`))
		t.Fatalf("send a message from the form: %v\n%s\npage %s:\n%s", err, describe(t, pool, id), loc, text)
	}
	result, err := chromedp.Run(bctx, chromedp.Text(`#live`))
	require.NoError(t, err)
	require.Contains(t, result, `"finished": "from the browser"`)
	require.Contains(t, result, "operator · send")
	require.Contains(t, result, "the message sent\n"+`{
  "finish": "from the browser"
}`)
	require.Equal(t, true, stillMarked, "the task's end was shown by a reload, not live")
	done, err := tasks.Get(ctx, pool, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, done.Status)

	// The state of a task, edited in the form its page fills with it and
	// confirmed, is the state the page shows; its history shows both.
	err = chromedp.Do(bctx,
		chromedp.Navigate(site+"/tasks/"+parked.String()),
		present(`#state-body`),
		eval(`document.querySelector("#state-body").value.includes('"step": "charge"')`, &stillMarked),
		chromedp.Clear(`#state-body`),
		chromedp.SendKeys(`#state-body`, `{"order": 42, "step": "ship", "address": "2 New`),
		present(`#state-check.bad`),
		chromedp.SendKeys(`#state-body`, ` Road"}`),
		present(`#state-check.ok`),
		shot("task-set-state"),
		clickFirst(`form.set-state button[type=submit]`),
		present(`#confirm`),
		shot("confirm-set-state"),
		follow(`#confirm`, "/tasks/"+parked.String()+"?done=set-state"),
		present(`.flash`),
		present(`#live .timeline .state-set`),
		shot("task-state-set"),
	)
	if err != nil {
		loc, _ := chromedp.Run(context.WithoutCancel(bctx), chromedp.Location())
		text, _ := chromedp.Run(context.WithoutCancel(bctx), chromedp.Text(`body`))
		t.Fatalf("set the state from the form: %v\n%s\npage %s:\n%s", err, describe(t, pool, parked), loc, text)
	}
	require.Equal(t, true, stillMarked, "the form was filled with the state")
	page, err := chromedp.Run(bctx, chromedp.Text(`#live`))
	require.NoError(t, err)
	require.Contains(t, page, "State\n"+`{
  "step": "ship",
  "order": 42,
  "address": "2 New Road"
}`)
	require.Contains(t, page, "operator · set_state")
	require.Contains(t, page, "the state replaced\n"+`{
  "step": "charge",
  "order": 42,
  "address": "1 Old Road"
}`)
	flash, err := chromedp.Run(bctx, chromedp.Text(`.flash`))
	require.NoError(t, err)
	require.Equal(t, "State set (the task's history keeps the one it replaced).", flash)
}

// seedForScreenshots adds tasks of other types, some failing or failed, so
// that the screenshots show what the pages look like on a real database.
func seedForScreenshots(t *testing.T, pool interface {
	tasks.DB
}) (nested tasks.ID) {
	t.Helper()
	ctx := context.Background()
	var specs []tasks.Spec
	for i := range 12 {
		specs = append(specs, tasks.Spec{Type: "orders.checkout", State: map[string]any{"order": 1000 + i, "items": []string{"tea", "milk"}}})
	}
	for i := range 5 {
		specs = append(specs, tasks.Spec{Type: "approval.order", State: map[string]any{"item": "a new laptop", "reminders": i}, WakeAt: time.Now().Add(time.Duration(i+1) * time.Minute)})
	}
	for i := range 4 {
		specs = append(specs, tasks.Spec{Type: "emails.send", State: map[string]any{"to": fmt.Sprintf("user%d@example.com", i)}})
	}
	ids, err := tasks.CreateMany(ctx, pool, specs)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE corotask.tasks SET failures = 3, last_error = 'smtp: connection refused (dial tcp 10.0.0.7:25)',
		wake_at = now() + interval '40 seconds' WHERE task_id = ANY($1)`, ids[17:19])
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE corotask.tasks SET done_at = now() - interval '12 minutes', outcome = 'failed', wake_at = NULL,
		failures = 5, last_error = 'payment declined: card expired' WHERE task_id = ANY($1)`, ids[10:12])
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE corotask.tasks SET done_at = now() - (random() * interval '55 minutes'), outcome = 'done', wake_at = NULL,
		result = '{"ok": true}' WHERE task_id = ANY($1)`, ids[0:8])
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE corotask.tasks SET wake_at = NULL WHERE task_id = ANY($1)`, ids[8:10])
	require.NoError(t, err)

	// A nested workflow: a batch of orders, each charging and shipping.
	nested, err = tasks.Create(ctx, pool, tasks.Spec{Type: "orders.batch", State: map[string]int{"orders": 3}})
	require.NoError(t, err)
	for i := range 3 {
		order, err := tasks.Create(ctx, pool, tasks.Spec{Type: "orders.checkout", Parent: nested, State: map[string]int{"order": 2000 + i}})
		require.NoError(t, err)
		for _, typ := range []tasks.Type{"payments.charge", "shipping.label"} {
			child, err := tasks.Create(ctx, pool, tasks.Spec{Type: typ, Parent: order, WakeAt: time.Now().Add(time.Minute)})
			require.NoError(t, err)
			if i == 0 || (i == 1 && typ == "payments.charge") {
				_, err = pool.Exec(ctx, `UPDATE corotask.tasks SET done_at = now(), outcome = 'done', wake_at = NULL WHERE task_id = $1`, child)
				require.NoError(t, err)
			}
			if i == 2 && typ == "payments.charge" {
				_, err = pool.Exec(ctx, `UPDATE corotask.tasks SET failures = 2, last_error = 'card declined' WHERE task_id = $1`, child)
				require.NoError(t, err)
			}
		}
	}
	// The batch and the orders wait for their children's completions.
	_, err = pool.Exec(ctx, `UPDATE corotask.tasks SET wake_at = NULL WHERE task_type IN ('orders.batch', 'orders.checkout') AND done_at IS NULL AND (task_id = $1 OR parent_id = $1)`, nested)
	require.NoError(t, err)
	return nested
}

// describe says what a task looks like, for a failure's message.
func describe(t *testing.T, db tasks.DB, id tasks.ID) string {
	tk, err := tasks.Get(context.Background(), db, id)
	if err != nil {
		return err.Error()
	}
	var inbox []string
	for _, m := range tk.Inbox {
		inbox = append(inbox, string(m))
	}
	return fmt.Sprintf("task %s is %s (failures %d, last error %q), state %s, inbox %v", id, tk.Status, tk.Failures, tk.LastError, tk.State, inbox)
}
