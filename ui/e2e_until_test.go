package ui_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/ui"
)

// untilTrue waits for a JavaScript expression to be true. It reads it again
// every 50ms, through navigations (while one is under way, the page has no
// context to evaluate in).
func untilTrue(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		ctx, cancel := context.WithTimeout(ctx, testdb.Patience)
		defer cancel()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			ok, err := chromedp.Evaluate[bool](expr)(ctx, tg)
			if err == nil && ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w (last error: %v)", expr, ctx.Err(), err)
			case <-tick.C:
			}
		}
	})
}

// present waits for an element sel matches.
func present(sel string) chromedp.Action[chromedp.Void] {
	return untilTrue(fmt.Sprintf(`document.querySelector(%q) !== null`, sel))
}

// clickFirst clicks the first element sel matches, once there is one, in
// one step of the page's JavaScript: a live update may replace the element
// between a lookup and a click of the mouse.
func clickFirst(sel string) chromedp.Action[chromedp.Void] {
	return untilTrue(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (e) e.click(); return !!e; })()`, sel))
}

// follow clicks a link (or a form's button) and waits for the page it
// leads to, path (with its query), to be loaded.
func follow(sel, path string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(clickFirst(sel), untilTrue(fmt.Sprintf(
		`location.pathname + location.search === %q && document.readyState === "complete"`, path)))
}

// serve serves the UI with cfg for the test, and starts a headless
// Chromium; it returns the server's URL and the browser's context. The
// browser is closed before the server, which waits for its live streams to
// end.
func serve(t *testing.T, cfg ui.Config) (string, context.Context) {
	t.Helper()
	h, err := ui.New(cfg)
	if err != nil {
		t.Fatalf("ui.New: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, browser(t)
}
