package ui_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
	"github.com/corotask/corotask/ui"
)

// TestBrowserKeySearch types a key into the header's box in headless
// Chromium and reads the list of the tasks with that key, with its key
// column.
func TestBrowserKeySearch(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	site, bctx := serve(t, ui.Config{Pool: pool})

	// The key "order:1042" names a checkout, its shipment and a mail; other
	// tasks have other keys or none.
	var want []tasks.ID
	for _, typ := range []tasks.Type{"orders.checkout", "shipping.label", "emails.send"} {
		want = append(want, create(t, pool, tasks.Spec{Type: typ, Key: "order:1042", State: map[string]int{"order": 1042}}))
	}
	for i := range 4 {
		create(t, pool, tasks.Spec{Type: "orders.checkout", Key: fmt.Sprintf("order:%d", 1050+i)})
		create(t, pool, tasks.Spec{Type: "emails.send"})
	}
	_, err := pool.Exec(ctx, `UPDATE corotask.tasks SET done_at = now() - interval '3 minutes', outcome = 'done', wake_at = NULL,
		result = '{"ok": true}' WHERE task_id = $1`, want[0])
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE corotask.tasks SET failures = 2, last_error = 'label printer offline',
		wake_at = now() + interval '30 seconds' WHERE task_id = $1`, want[1])
	require.NoError(t, err)

	until := untilTrue
	shot := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if !*screenshots {
			return nil
		}
		png, err := chromedp.FullScreenshot(100)(ctx, tg)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join("..", "docs", "ui", "tasks-by-key.png"), png, 0o644)
	})

	const box = `header form.goto input[name=id]`
	err = chromedp.Do(bctx,
		chromedp.Navigate(site+"/"),
		present(box),
		chromedp.SendKeys(box, "order:1042\n"),
		until(`location.pathname + location.search === "/tasks?key=order%3A1042" && document.readyState === "complete"`),
		until(`document.querySelectorAll("table.tasks tbody tr").length === 3`),
		shot,
	)
	if err != nil {
		loc, _ := chromedp.Run(context.WithoutCancel(bctx), chromedp.Location())
		text, _ := chromedp.Run(context.WithoutCancel(bctx), chromedp.Text(`body`))
		t.Fatalf("search by key: %v\npage %s:\n%s", err, loc, text)
	}
	heads, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.tasks thead th")].map(e => e.textContent)`))
	require.NoError(t, err)
	require.Equal(t, []string{"ID", "Type", "Key", "Status", "Created", "Wakes / ended", "Inbox", "Failures", "Last error"}, heads)
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.tasks tbody tr")].map(r =>
		[...r.querySelectorAll("td")].slice(0, 4).map(c => c.textContent.trim()).join(" | "))`))
	require.NoError(t, err)
	require.Equal(t, []string{
		want[2].String() + " | emails.send | order:1042 | ready",
		want[1].String() + " | shipping.label | order:1042 | retrying",
		want[0].String() + " | orders.checkout | order:1042 | done",
	}, rows)
	filled, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("form.filters input[name=key]").value`))
	require.NoError(t, err)
	require.Equal(t, "order:1042", filled, "the tasks page's form shows the key it filters on")
}

func create(t *testing.T, db tasks.DB, spec tasks.Spec) tasks.ID {
	t.Helper()
	id, err := tasks.Create(context.Background(), db, spec)
	require.NoError(t, err)
	return id
}
