package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/jackc/pgx/v5"

	corosql "github.com/corotask/corotask/sql"
)

var migrateCmd = &command{
	name:      "migrate",
	anySchema: true,
	// A user who names a database to migrate wants it to exist.
	createDatabase: true,
	summary:        "apply the database schema",
	help: `Create the database when it does not exist (whichever it is: the default
corotask on 127.0.0.1:5432, or one given), through the server's
maintenance database, and say so. Then apply the schema migrations the
database has not applied yet, and the SQL function files that changed
since they were last applied, in one transaction, and say which. Running
it again, or from several processes at once, is safe. A database migrated
by a newer corotask is refused, unless its newer migrations declare this
version compatible: it is then left as it is. Every other command refuses
a schema this version does not run on, or a database that does not exist,
and says to run this one.

With --citus, the database is the coordinator of a Citus cluster (the
citus extension on every node, the nodes registered in it): after the
migrations, it distributes the tasks, their messages and their history by
the root of each workflow tree, once, and makes the functions executors
claim with there (see docs/scaling.md, "Citus"). Later runs of migrate,
with or without --citus, keep those functions up to date.`,
	example: `corotask migrate --database-url postgres://postgres@db.internal:5432/app`,
	flags: func(fs *flag.FlagSet) runFunc {
		citus := fs.Bool("citus", false, "distribute the schema over the Citus cluster whose coordinator the database is")
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args); err != nil {
				return err
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				var r corosql.Report
				if err := corosql.Migrate(ctx, conn, corosql.Reporting(&r)); err != nil {
					return err
				}
				for _, m := range r.Migrations {
					fmt.Fprintf(a.stdout, "applied %s\n", m.Name)
				}
				for _, f := range r.Functions {
					fmt.Fprintf(a.stdout, "applied functions/%s\n", f.Name)
				}
				if len(r.Migrations) == 0 && len(r.Functions) == 0 {
					fmt.Fprintf(a.stdout, "schema up to date (version %d)\n", r.Version)
				}
				if *citus {
					if err := corosql.Distribute(ctx, conn); err != nil {
						return err
					}
					fmt.Fprintln(a.stdout, "distributed over the Citus cluster: tasks, messages and history by the root of each tree")
				}
				return nil
			})
		}
	},
}
