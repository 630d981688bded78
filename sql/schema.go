package sql

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// Schema describes a corotask schema: what a database holds (see
// CheckSchema), or what a build needs (see BuildSchema).
type Schema struct {
	// Migration is the last migration applied (of a build: its last
	// migration); 0 when the database holds no corotask schema.
	Migration int
	// Functions is the release of the SQL functions (the newest recorded in
	// the database; of a build: its own).
	Functions int
	// CompatibleFrom is the oldest build, named by its last migration, that
	// runs correctly on this schema: the highest "compatible-from" of the
	// migrations applied (see Migration.CompatibleFrom).
	CompatibleFrom int
}

// ErrSchemaBehind: the database's schema is older than this build needs
// (or there is none): run `corotask migrate`, or Migrate, with this build.
var ErrSchemaBehind = errors.New("corotask schema older than this build")

// ErrSchemaAhead: the database's schema was migrated by a newer build, whose
// migrations this build cannot run on: upgrade corotask.
var ErrSchemaAhead = errors.New("corotask schema newer than this build")

// SchemaError says why this build cannot run on a database's schema. It
// wraps ErrSchemaBehind or ErrSchemaAhead.
type SchemaError struct {
	Found  Schema // what the database holds
	Needed Schema // what this build needs (BuildSchema)
	// Ahead: the schema is newer than this build (ErrSchemaAhead); else it
	// is older (ErrSchemaBehind).
	Ahead bool
}

func (e *SchemaError) Unwrap() error {
	if e.Ahead {
		return ErrSchemaAhead
	}
	return ErrSchemaBehind
}

const migrateHint = "run 'corotask migrate' or sql.Migrate with this build"

func (e *SchemaError) Error() string {
	f, n := e.Found, e.Needed
	switch {
	case e.Ahead:
		return fmt.Sprintf("corotask schema newer than this build (migration %d, this build knows %d; it runs builds from migration %d on): upgrade corotask",
			f.Migration, n.Migration, f.CompatibleFrom)
	case f.Migration == 0:
		return fmt.Sprintf("no corotask schema in this database (this build needs migration %d): %s", n.Migration, migrateHint)
	case f.Migration < n.Migration:
		return fmt.Sprintf("corotask schema at migration %d, this build needs %d: %s", f.Migration, n.Migration, migrateHint)
	default:
		return fmt.Sprintf("corotask functions at release %d, this build needs %d: %s", f.Functions, n.Functions, migrateHint)
	}
}

// BuildSchema returns the schema this build needs: its last migration, its
// functions release, and the compatible-from its last migration declares.
func BuildSchema() Schema {
	migrations, err := Migrations()
	if err != nil || len(migrations) == 0 {
		// The embedded files are checked by the tests: this cannot happen
		// in a build that passed them.
		panic(fmt.Sprintf("corotask: embedded migrations: %v", err))
	}
	last := migrations[len(migrations)-1]
	return Schema{Migration: last.Version, Functions: functionsRelease, CompatibleFrom: last.CompatibleFrom}
}

// CheckSchema reads which migrations and function files db has applied, and
// reports whether this build runs on them. It returns what it found, and:
//
//   - nil when the schema is this build's, or newer but compatible: every
//     migration past this build's last declares that builds as old as this
//     one still run on it (Found.Migration > BuildSchema().Migration then
//     tells the two apart). Newer functions are always fine: a function
//     release keeps serving the builds before it.
//   - a *SchemaError wrapping ErrSchemaBehind when the database has no
//     corotask schema, misses migrations of this build, or has functions
//     older than this build's (that differ from them);
//   - a *SchemaError wrapping ErrSchemaAhead when the database was migrated
//     by a newer build that older ones cannot run on;
//   - any other error when it cannot read them: a role that may not read
//     the bookkeeping tables (Migrate grants SELECT on them to PUBLIC), or
//     the database's own errors.
//
// Executors check at start and the CLI before each command; a program that
// uses the tasks and inbox packages alone may call it too.
func CheckSchema(ctx context.Context, db tasks.DB) (Schema, error) {
	need := BuildSchema()
	found, err := readSchema(ctx, db)
	if err != nil {
		return found, err
	}
	switch {
	case found.Migration < need.Migration:
		return found, &SchemaError{Found: found, Needed: need}
	case found.Migration > need.Migration && found.CompatibleFrom > need.Migration:
		return found, &SchemaError{Found: found, Needed: need, Ahead: true}
	case found.Functions >= need.Functions:
		return found, nil
	}
	// Functions of an older release: fine only if they are this build's
	// (a database migrated before releases were recorded has release 0).
	same, err := sameFunctions(ctx, db)
	if err != nil {
		return found, err
	}
	if !same {
		return found, &SchemaError{Found: found, Needed: need}
	}
	return found, nil
}

// readSchema reads the state of db's schema from the bookkeeping tables. The
// columns added to them over time are read through to_jsonb, so that the
// tables of any earlier build can be read.
func readSchema(ctx context.Context, db tasks.DB) (Schema, error) {
	var s Schema
	var migrations, functions bool
	if err := db.QueryRow(ctx, query.SchemaTablesExist).Scan(&migrations, &functions); err != nil {
		return s, fmt.Errorf("check the corotask schema: %w", err)
	}
	if !migrations {
		return s, nil
	}
	if err := db.QueryRow(ctx, query.SchemaVersion).Scan(&s.Migration, &s.CompatibleFrom); err != nil {
		return s, readError(err)
	}
	if !functions {
		return s, nil
	}
	if err := db.QueryRow(ctx, query.SchemaFunctionsRelease).Scan(&s.Functions); err != nil {
		return s, readError(err)
	}
	return s, nil
}

// sameFunctions reports whether db has applied this build's function files,
// each as it is in this build.
func sameFunctions(ctx context.Context, db tasks.DB) (bool, error) {
	files, err := FunctionFiles()
	if err != nil {
		return false, err
	}
	rows, err := db.Query(ctx, query.SchemaFunctionFiles)
	if err != nil {
		return false, readError(err)
	}
	recorded := map[string]string{}
	var name, sum string
	if _, err := pgx.ForEachRow(rows, []any{&name, &sum}, func() error {
		recorded[name] = sum
		return nil
	}); err != nil {
		return false, readError(err)
	}
	for _, f := range files {
		if recorded[f.Name] != f.Checksum() {
			return false, nil
		}
	}
	return true, nil
}

// readError explains an error reading the bookkeeping tables.
func readError(err error) error {
	if dberr.PermissionDenied(err) {
		return fmt.Errorf("check the corotask schema: %w: the role may not read corotask.migrations and corotask.function_files; %s (it grants SELECT on them to PUBLIC), or grant it",
			err, migrateHint)
	}
	return fmt.Errorf("check the corotask schema: %w", err)
}

// compatibleFromHeader is how a migration declares the oldest build that
// still runs on the schema it leaves, in a comment line of its header.
const compatibleFromHeader = "-- compatible-from:"

// parseCompatibleFrom reads the compatible-from a migration declares in the
// comment lines that open it; a migration that declares none leaves a
// schema only builds that know it run on.
func parseCompatibleFrom(name string, version int, sql string) (int, error) {
	for _, line := range strings.Split(sql, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "--") {
			break // the header ends at the first statement
		}
		rest, ok := strings.CutPrefix(line, compatibleFromHeader)
		if !ok {
			continue
		}
		v, err := strconv.Atoi(strings.TrimSpace(rest))
		if err != nil || v <= 0 || v > version {
			return 0, fmt.Errorf("migration %s: %q: want a migration version from 1 to %d", name, line, version)
		}
		return v, nil
	}
	return version, nil
}
