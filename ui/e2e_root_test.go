package ui_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
	"github.com/corotask/corotask/ui"
)

// A task deep in a workflow links to its tree's root and to the whole tree,
// which a person follows from the grandchild's page to the root's tree; a
// child of the root links to the whole tree only (its parent is the root).
func TestBrowserTaskLinksToItsRoot(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	h, err := ui.New(ui.Config{Pool: pool})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	bctx := browser(t)

	root, child, grandchild := tasks.NewID(), tasks.NewID(), tasks.NewID()
	_, err = tasks.CreateMany(ctx, pool, []tasks.Spec{
		{ID: root, Type: "e2e.order"},
		{ID: child, Type: "e2e.payment", Parent: root},
		{ID: grandchild, Type: "e2e.charge", Parent: child},
	})
	require.NoError(t, err)
	until := untilTrue
	present := func(sel string) chromedp.Action[chromedp.Void] {
		return until(fmt.Sprintf(`document.querySelector(%q) !== null`, sel))
	}
	var rootLink, treeLinks, childRootLinks, nodes any
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/tasks/"+grandchild.String()),
		present(`a.root`),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			var err error
			rootLink, err = chromedp.Evaluate[any](`[document.querySelector("a.root").textContent, document.querySelector("a.root").getAttribute("href")]`)(ctx, tg)
			if err != nil {
				return err
			}
			treeLinks, err = chromedp.Evaluate[any](`document.querySelector("a.root-tree").getAttribute("href")`)(ctx, tg)
			return err
		}),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if os.Getenv("COROTASK_UI_SHOTS") == "" {
				return nil
			}
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(os.Getenv("COROTASK_UI_SHOTS")+"/task-root.png", png, 0o644)
		}),
		until(`(() => { const e = document.querySelector("a.root-tree"); if (e) e.click(); return !!e; })()`),
		until(`location.pathname === "/tasks/`+root.String()+`/tree" && document.readyState === "complete"`),
		present(`.tree .node`),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			var err error
			nodes, err = chromedp.Evaluate[any](`document.querySelectorAll(".tree .node").length`)(ctx, tg)
			return err
		}),
		chromedp.Navigate(srv.URL+"/tasks/"+child.String()),
		present(`a.root-tree`),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			var err error
			childRootLinks, err = chromedp.Evaluate[any](`document.querySelectorAll("a.root").length`)(ctx, tg)
			return err
		}),
	))
	require.Equal(t, []any{root.String(), "/tasks/" + root.String()}, rootLink)
	require.Equal(t, "/tasks/"+root.String()+"/tree", treeLinks)
	require.EqualValues(t, 3, nodes, "the root's tree: the root, its child and its grandchild")
	require.EqualValues(t, 0, childRootLinks, "the child's parent is the root: no second link to it")
}
