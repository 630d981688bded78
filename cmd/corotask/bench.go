package main

import (
	"context"
	"flag"
	"slices"
	"strings"

	"github.com/corotask/corotask/internal/bench"
	"github.com/corotask/corotask/internal/database"
)

var benchCmd = &command{
	name:    "bench",
	args:    "SCENARIO",
	summary: "run a benchmark scenario",
	help:    bench.Usage,
	example: `corotask bench oneshot -n 50000 -workers 100
corotask bench pingpong --json
corotask bench oneshot -executors 2
corotask bench tree -stock-cluster -statements
corotask bench pressure -stock-cluster -mode killbackends
corotask bench limit -max-running 5
corotask bench priority -backlog 100000
corotask bench keylimit -limit-keys 10000`,
	flags: func(fs *flag.FlagSet) runFunc {
		var opts bench.Options
		opts.RegisterFlags(fs)
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args, "SCENARIO"); err != nil {
				return err
			}
			if !slices.Contains(bench.Scenarios(), args[0]) && args[0] != "all" {
				return usagef("unknown scenario %q: want one of %s, all", args[0], strings.Join(bench.Scenarios(), ", "))
			}
			opts.Scenario = args[0]
			if opts.StockCluster {
				// A throwaway cluster of its own: no server to resolve.
				if a.databaseURL != "" || a.privateCluster {
					return usagef("-stock-cluster runs on a cluster of its own: drop --database-url and --private-cluster")
				}
				return bench.Run(ctx, opts, a.stdout, a.stderr)
			}
			if a.localURL == "" {
				// bench makes databases of its own on the local server,
				// from its maintenance database: the default corotask
				// database need not exist.
				a.localURL = database.LocalMaintenanceURL
			}
			t, err := a.target(ctx)
			if err != nil {
				return err
			}
			// An empty URL (libpq's environment) resolves to the same
			// environment again in bench.
			opts.DatabaseURL = t.ConnString
			return bench.Run(ctx, opts, a.stdout, a.stderr)
		}
	},
}
