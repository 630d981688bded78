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
	commit, err := citusCommitPolls()
	if err != nil {
		return err
	}
	// Before the claim functions: those set commit_polls' options, which
	// CREATE OR REPLACE would reset.
	if _, err := tx.Exec(ctx, commit); err != nil {
		return fmt.Errorf("make the commit function of a distributed database: %w", err)
	}
	if _, err := tx.Exec(ctx, query.ClaimShardFunctions()); err != nil {
		return fmt.Errorf("make the claim functions of a distributed database: %w", err)
	}
	return nil
}

// citusFilter is a filter of commit_polls that only a distributed database
// runs: a comment, /*citus: AND ... */, in the function's file.
var citusFilter = regexp.MustCompile(`/\*citus: (.*?) \*/`)

// citusCommitFilters is how many citusFilter marks commit_polls holds.
const citusCommitFilters = 3

// citusCommitPolls returns commit_polls as a distributed database runs it:
// the function of functions/commit.sql with its citus: filters made part
// of its statements (they name the roots of the batch's trees, so that
// Citus sends each statement only to the shards that hold them).
func citusCommitPolls() (string, error) {
	file, err := files.ReadFile("functions/commit.sql")
	if err != nil {
		return "", fmt.Errorf("read the commit function: %w", err)
	}
	_, def, ok := strings.Cut(string(file), "CREATE OR REPLACE FUNCTION corotask.commit_polls(")
	if !ok {
		return "", fmt.Errorf("functions/commit.sql holds no corotask.commit_polls")
	}
	def, _, ok = strings.Cut(def, "\n$$;\n")
	if !ok {
		return "", fmt.Errorf("functions/commit.sql: corotask.commit_polls does not end")
	}
	if n := len(citusFilter.FindAllString(def, -1)); n != citusCommitFilters {
		return "", fmt.Errorf("functions/commit.sql: corotask.commit_polls holds %d citus: filters, not %d", n, citusCommitFilters)
	}
	return "CREATE OR REPLACE FUNCTION corotask.commit_polls(" + citusFilter.ReplaceAllString(def, "$1") + "\n$$;\n", nil
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
