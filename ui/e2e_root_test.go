package ui_test

import (
	"context"
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
	site, bctx := serve(t, ui.Config{Pool: pool})

	root, child, grandchild := tasks.NewID(), tasks.NewID(), tasks.NewID()
	_, err := tasks.CreateMany(context.Background(), pool, []tasks.Spec{
		{ID: root, Type: "e2e.order"},
		{ID: child, Type: "e2e.payment", Parent: root},
		{ID: grandchild, Type: "e2e.charge", Parent: child},
	})
	require.NoError(t, err)

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(site+"/tasks/"+grandchild.String()),
		present(`a.root`),
	))
	rootLink, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](
		`[document.querySelector("a.root").textContent, document.querySelector("a.root").getAttribute("href")]`))
	require.NoError(t, err)
	require.Equal(t, []string{root.String(), "/tasks/" + root.String()}, rootLink)

	require.NoError(t, chromedp.Do(bctx,
		follow(`a.root-tree`, "/tasks/"+root.String()+"/tree"),
		present(`.tree .node`),
	))
	nodes, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll(".tree .node").length`))
	require.NoError(t, err)
	require.Equal(t, 3, nodes, "the root's tree: the root, its child and its grandchild")

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(site+"/tasks/"+child.String()),
		present(`a.root-tree`),
	))
	rootLinks, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("a.root").length`))
	require.NoError(t, err)
	require.Zero(t, rootLinks, "the child's parent is the root: no second link to it")
}
