package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/jackc/pgx/v5"

	corosql "github.com/corotask/corotask/sql"
)

var migrateCmd = &command{
	name:    "migrate",
	summary: "apply the database schema",
	help: `Apply the schema migrations the database has not applied yet, in one
transaction, and say which. Running it again, or from several processes at
once, is safe.`,
	example: `corotask migrate --database-url postgres://postgres@db.internal:5432/app`,
	flags: func(fs *flag.FlagSet) runFunc {
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args); err != nil {
				return err
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				applied, err := corosql.Apply(ctx, conn)
				if err != nil {
					return err
				}
				for _, m := range applied {
					fmt.Fprintf(a.stdout, "applied %s\n", m.Name)
				}
				if len(applied) > 0 {
					return nil
				}
				var version int
				if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM corotask.migrations").Scan(&version); err != nil {
					return fmt.Errorf("read schema version: %w", err)
				}
				fmt.Fprintf(a.stdout, "schema up to date (version %d)\n", version)
				return nil
			})
		}
	},
}
