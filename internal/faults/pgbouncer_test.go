package faults_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/faults"
	"github.com/corotask/corotask/internal/pgbouncer"
)

// TestFaultsBehindPgBouncer runs the short run of TestFaults with the
// workers and the harness behind a real PgBouncer in transaction mode, set
// up as docs/operations.md says (LISTEN off, pgx's cache_describe query
// mode), and checks the ledger: nothing lost, nothing twice. PgBouncer
// stands in front of a private cluster, which the run restarts, or else the
// shared server. Workers' server connections are terminated under
// PgBouncer, and frozen or killed workers leave it transactions to clean up.
func TestFaultsBehindPgBouncer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the fault harness needs Linux signals and /proc")
	}
	ctx := context.Background()
	duration := 10 * time.Second

	url, restart := faultsDatabase(t)
	through := pgbouncer.Start(t, url, pgbouncer.Options{PoolSize: 20})

	dir := *flagDir
	if dir == "" {
		dir = t.TempDir()
	} else {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	cfg := faults.Config{
		URL: through + "&default_query_exec_mode=cache_describe", DisableListen: true,
		Dir: dir, Command: workerCommand, Restart: restart,
		Duration: duration, Workers: *flagWorkers, Seed: *flagSeed,
		RestartEvery: min(max(duration/3, 5*time.Second), 30*time.Second),
		Logf:         t.Logf,
	}
	r, err := faults.Run(ctx, cfg)
	require.NoError(t, err)
	t.Logf("faults behind PgBouncer: figures:\n%s", r)
	if violations := r.Violations(); len(violations) > 0 {
		logs, _ := os.ReadDir(dir)
		for _, f := range logs {
			if b, err := os.ReadFile(dir + "/" + f.Name()); err == nil && strings.HasSuffix(f.Name(), ".log") {
				t.Logf("%s:\n%s", f.Name(), b)
			}
		}
		t.Fatalf("faults behind PgBouncer: %d violations:\n%s", len(violations), strings.Join(violations, "\n"))
	}
	require.Zero(t, r.Ledger.Total.Lost)
	require.Zero(t, r.Ledger.Total.Duplicated)
	require.Positive(t, r.Ledger.CommittedPolls)
	require.Positive(t, r.Ledger.AwaitedPolls, "no poll awaited its children")
}
