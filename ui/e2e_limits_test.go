package ui_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
	"github.com/corotask/corotask/ui"
)

// limitsShots is where TestBrowserLimits writes its screenshots; with
// -screenshots and no directory, to docs/ui/.
var limitsShots = flag.String("limits-screenshots", "", "write TestBrowserLimits' screenshots (PNG) to this directory")

// TestBrowserLimits, in headless Chromium: a person opens the Limits page,
// pauses a type there (and confirms), sees it paused there, on the
// overview and in its tasks' status, resumes it, and sees a task that its
// type's maximum holds back as limited.
func TestBrowserLimits(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	site, bctx := serve(t, ui.Config{Pool: pool, RefreshInterval: 100 * time.Millisecond})

	// reports.build runs at most one at a time, and runs one (its claim set
	// here: no executor runs in this test); billing.charge counts in key
	// space tenants; mail.send takes from rate limit smtp.
	running := create(t, pool, tasks.Spec{Type: "reports.build"})
	_, err := pool.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid(), heartbeat = now(),
		claim_expires_at = now() + interval '1 hour', counted = true WHERE task_id = $1`, running)
	require.NoError(t, err)
	waiting := create(t, pool, tasks.Spec{Type: "reports.build"})
	create(t, pool, tasks.Spec{Type: "billing.charge"})
	// Key acme runs its 2 tasks of billing.charge; a third waits, at
	// priority 5.
	for range 2 {
		_, err = pool.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid(), heartbeat = now(),
			claim_expires_at = now() + interval '1 hour', limit_key = 'acme' WHERE task_id = $1`,
			create(t, pool, tasks.Spec{Type: "billing.charge"}))
		require.NoError(t, err)
	}
	acme := create(t, pool, tasks.Spec{Type: "billing.charge"})
	_, err = pool.Exec(ctx, `UPDATE corotask.tasks SET limit_key = 'acme' WHERE task_id = $1`, acme)
	require.NoError(t, err)
	require.NoError(t, tasks.SetPriority(ctx, pool, acme, 5))
	create(t, pool, tasks.Spec{Type: "mail.send"})
	require.NoError(t, tasks.SetMaxRunning(ctx, pool, "reports.build", 1))
	require.NoError(t, tasks.SetKeyLimit(ctx, pool, "tenants", 2, []tasks.Type{"billing.charge"}))
	require.NoError(t, tasks.SetRateLimit(ctx, pool, "smtp", 100, time.Minute, []tasks.Type{"mail.send"}))

	// docs are the screenshots docs/ui.md shows.
	dir, docs := *limitsShots, map[string]bool{}
	if dir == "" && *screenshots {
		dir, docs = filepath.Join("..", "docs", "ui"), map[string]bool{"limits-paused": true, "limits-keys": true, "tasks-priority": true}
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if dir == "" || len(docs) > 0 && !docs[name] {
				return nil
			}
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
		})
	}
	until := untilTrue
	// row is the text of a type's row on the Limits page.
	row := func(typ string) string {
		return fmt.Sprintf(`((document.querySelector('tr[data-type=%q]') || {}).textContent || "")`, typ)
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			loc, _ := chromedp.Run(context.WithoutCancel(bctx), chromedp.Location())
			text, _ := chromedp.Run(context.WithoutCancel(bctx), chromedp.Text(`body`))
			t.Fatalf("%s: %v\npage %s:\n%s", what, err, loc, text)
		}
	}

	// The Limits page, from the navigation, lists the three controls.
	do("open the Limits page",
		chromedp.Navigate(site+"/"),
		follow(`header nav a[href="/limits"]`, "/limits"),
		until(row("reports.build")+`.includes("active") && `+row("reports.build")+`.includes("1 / 1")`),
		until(`document.querySelector("#space-tenants") !== null && document.querySelector("#rate-smtp") !== null`),
		shot("limits"),
	)

	// Paused from its row, after the confirmation.
	do("pause reports.build",
		follow(`tr[data-type="reports.build"] form.type-action button`, "/types/pause"),
		until(`document.querySelector("pre.question").textContent.startsWith("Pause type reports.build?")`),
		shot("limits-confirm-pause"),
		follow(`#confirm`, "/limits?done=pause"),
		until(`document.querySelector(".flash").textContent.startsWith("Type paused")`),
		until(row("reports.build")+`.includes("paused") && `+row("reports.build")+`.includes("Resume")`),
		shot("limits-paused"),
	)
	paused, err := tasks.Controls(ctx, pool)
	require.NoError(t, err)
	c, ok := paused.Type("reports.build")
	require.True(t, ok)
	require.True(t, c.Paused(), "the button paused the type")

	// The overview marks it; its waiting task is paused.
	do("see it paused",
		follow(`header nav a[href="/"]`, "/"),
		until(`document.querySelector('tr[data-type="reports.build"] .badge.paused') !== null`),
		until(`document.querySelector('tr[data-type="billing.charge"] .badge.paused') === null`),
		shot("overview-paused"),
		chromedp.Navigate(site+"/tasks/"+waiting.String()),
		until(`document.querySelector(".facts .status").textContent === "paused"`),
	)

	// Resumed from the Limits page: its task waits on the type's maximum,
	// limited.
	do("resume reports.build",
		follow(`header nav a[href="/limits"]`, "/limits"),
		follow(`tr[data-type="reports.build"] form.type-action button`, "/types/resume"),
		until(`document.querySelector("pre.question").textContent.startsWith("Resume type reports.build, paused since")`),
		follow(`#confirm`, "/limits?done=resume"),
		until(row("reports.build")+`.includes("active") && `+row("reports.build")+`.includes("Pause")`),
		follow(`tr[data-type="reports.build"] td a[href="/tasks?type=reports.build"]`, "/tasks?type=reports.build"),
		until(fmt.Sprintf(`[...document.querySelectorAll("table.tasks tbody tr")].some(r =>
			r.textContent.includes(%q) && r.querySelector(".status.s-limited") !== null)`, waiting.String())),
		shot("tasks-limited"),
		chromedp.Navigate(site+"/tasks/"+waiting.String()),
		until(`document.querySelector(".facts .status").textContent === "limited"`),
		until(`document.querySelector("dd.flow") !== null && document.querySelector("dd.flow").textContent.includes("at most 1 running")`),
		shot("task-limited"),
	)
	// The key at its limit, and the task that waits on it, with its
	// priority and limit key.
	do("see a key at its limit",
		follow(`header nav a[href="/limits"]`, "/limits"),
		until(`document.querySelector("#space-tenants td.key") !== null && document.querySelector("#space-tenants td.key").textContent === "acme"`),
		until(`[...document.querySelectorAll("#space-tenants tbody td")].map(c => c.textContent).join(" ") === "acme 2 1"`),
		shot("limits-keys"),
		follow(`#space-tenants a[href="/tasks?type=billing.charge"]`, "/tasks?type=billing.charge"),
		until(fmt.Sprintf(`[...document.querySelectorAll("table.tasks tbody tr")].some(r => r.textContent.includes(%q) &&
			[...r.querySelectorAll("td")].map(c => c.textContent.trim()).slice(2, 5).join(" | ") === "5 | acme | limited")`, acme.String())),
		shot("tasks-priority"),
	)
	resumed, err := tasks.Controls(ctx, pool)
	require.NoError(t, err)
	c, ok = resumed.Type("reports.build")
	require.True(t, ok)
	require.False(t, c.Paused(), "the button resumed the type")
}
