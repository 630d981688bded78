package ui

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

// treePage is the tree page's data.
type treePage struct {
	Root  *treeNode
	Count int
	Cut   bool
}

// maxTreeNodes is the most tasks the tree page shows.
const maxTreeNodes = 1000

func loadTree(ctx context.Context, h *Handler, r *http.Request, tx pgx.Tx, v *view) error {
	id, err := parseTaskID(r)
	if err != nil {
		return err
	}
	root, n, cut, err := loadTreeNodes(ctx, tx, id, maxTreeNodes)
	if err != nil {
		return err
	}
	if root == nil {
		return fmt.Errorf("%w: %s", tasks.ErrNotFound, id)
	}
	v.Title, v.P = "Tree of "+id.String()+" · corotask", &treePage{Root: root, Count: n, Cut: cut}
	return nil
}
