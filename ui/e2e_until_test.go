package ui_test

import (
	"context"
	"fmt"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corotask/corotask/internal/testdb"
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
