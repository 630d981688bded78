package sql

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

//go:embed citus/distribute.sql
var distributeSQL string

// Distribute spreads a migrated database over a Citus cluster, once: db is
// the coordinator's database, with the citus extension on every node and
// the nodes registered in it (scripts/citus/cluster.sh makes such a
// cluster). It distributes the tasks, their messages and their history by
// the root of each workflow tree (sql/citus/distribute.sql says what it
// changes), then makes the functions an executor claims with there (see
// docs/scaling.md, "Citus"). Run again, it finds the tables distributed and
// makes the functions again. Migrate does the latter by itself on a
// distributed database.
func Distribute(ctx context.Context, db tasks.DB) error {
	if _, err := db.Exec(ctx, distributeSQL); err != nil {
		return fmt.Errorf("distribute the schema: %w", err)
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		return citusFunctions(ctx, tx, true)
	})
}

// citusFunctions makes, on a database whose tasks are distributed, the
// functions an executor needs there (query.ClaimShardFunctions): those of
// this build's claim, and the plan settings Citus needs of the functions
// Migrate has just made again. Unless must, it does nothing on a database
// that is not distributed.
func citusFunctions(ctx context.Context, tx pgx.Tx, must bool) error {
	distributed, err := Distributed(ctx, tx)
	if err != nil {
		return err
	}
	if !distributed {
		if must {
			return fmt.Errorf("corotask.tasks is not distributed after the distribution")
		}
		return nil
	}
	// A newer build applied its functions (applyFunctions kept them): its
	// own forms of these are in place. Else before the claim functions:
	// those set these functions' options, which CREATE OR REPLACE would
	// reset.
	var newest int
	if err := tx.QueryRow(ctx, query.SchemaFunctionsNewestRelease).Scan(&newest); err != nil {
		return fmt.Errorf("read applied function files: %w", err)
	}
	for _, f := range citusFiltered {
		if newest > functionsRelease {
			break
		}
		def, err := f.definition()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, def); err != nil {
			return fmt.Errorf("make %s of a distributed database: %w", f.function, err)
		}
	}
	if _, err := tx.Exec(ctx, query.ClaimShardFunctions()); err != nil {
		return fmt.Errorf("make the claim functions of a distributed database: %w", err)
	}
	return nil
}

// citusFilter is a filter that only a distributed database runs: a
// comment, /*citus: AND ... */, in a function's file.
var citusFilter = regexp.MustCompile(`/\*citus: (.*?) \*/`)

// citusFunction is a function whose statements name the roots of the
// trees they write in citusFilter comments, and how many it holds.
type citusFunction struct {
	file, function string
	filters        int
}

// citusFiltered are the functions a distributed database runs with their
// citus: filters made part of their statements (they name the roots of the
// trees written, so that Citus sends each statement only to the shards that
// hold them); one server runs the files as they are, the filters comments.
var citusFiltered = []citusFunction{
	{"functions/commit.sql", "corotask.commit_polls", 3},
	{"functions/api.sql", "corotask.deliver_all", 1},
	{"functions/api.sql", "corotask.deliver_one", 2},
}

// definition returns the function as a distributed database runs it: its
// definition in its file, with its citus: filters made part of its
// statements.
func (f citusFunction) definition() (string, error) {
	file, err := files.ReadFile(f.file)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", f.file, err)
	}
	head := "CREATE OR REPLACE FUNCTION " + f.function + "("
	_, def, ok := strings.Cut(string(file), head)
	if !ok {
		return "", fmt.Errorf("%s holds no %s", f.file, f.function)
	}
	def, _, ok = strings.Cut(def, "\n$$;\n")
	if !ok {
		return "", fmt.Errorf("%s: %s does not end", f.file, f.function)
	}
	if n := len(citusFilter.FindAllString(def, -1)); n != f.filters {
		return "", fmt.Errorf("%s: %s holds %d citus: filters, not %d", f.file, f.function, n, f.filters)
	}
	return head + citusFilter.ReplaceAllString(def, "$1") + "\n$$;\n", nil
}

// Distributed reports whether Citus distributes db's tasks (Distribute
// did). On a server without Citus it reads nothing of Citus' catalog.
func Distributed(ctx context.Context, db tasks.DB) (bool, error) {
	var citus, distributed bool
	if err := db.QueryRow(ctx, query.CitusInstalled).Scan(&citus); err != nil {
		return false, fmt.Errorf("look for the citus extension: %w", err)
	}
	if !citus {
		return false, nil
	}
	if err := db.QueryRow(ctx, query.CitusDistributed).Scan(&distributed); err != nil {
		return false, fmt.Errorf("look for the distribution of corotask.tasks: %w", err)
	}
	return distributed, nil
}
