package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/corotask/corotask/internal/database"
)

// startStockCluster initdb's and starts a throwaway cluster for
// Options.StockCluster, and returns its URL and a function that stops and
// removes it. Its settings are PostgreSQL's stock ones (autovacuum on), but
// for those internal/database needs (a unix socket only, 200 connections),
// pg_stat_statements with Options.Statements (tracking the statements inside
// functions too), and Options.StockSettings.
func startStockCluster(ctx context.Context, o Options, stderr io.Writer) (string, func(), error) {
	parent, err := os.MkdirTemp("", "corotask-bench-")
	if err != nil {
		return "", nil, fmt.Errorf("private cluster: %w", err)
	}
	// The server runs as the postgres OS user when this runs as root: it
	// must be able to enter the directory.
	if err := os.Chmod(parent, 0o755); err != nil {
		_ = os.RemoveAll(parent)
		return "", nil, fmt.Errorf("private cluster: %w", err)
	}
	dir := filepath.Join(parent, "data")
	var settings []string
	if o.Statements {
		settings = append(settings, "shared_preload_libraries = 'pg_stat_statements'", "pg_stat_statements.track = all")
	}
	settings = append(settings, o.StockSettings...)
	fmt.Fprintf(stderr, "bench: starting a private cluster in %s\n", dir)
	u, err := database.PrivateWithSettings(ctx, dir, settings)
	remove := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := database.RemovePrivate(rctx, dir); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
		}
		_ = os.RemoveAll(parent)
	}
	if err != nil {
		remove()
		return "", nil, err
	}
	return u, remove, nil
}
