// Package sql holds corotask's schema, embedded in the binary, and applies it.
//
// Everything corotask stores lives in the PostgreSQL schema "corotask": the
// table corotask.tasks, the SQL functions corotask.create_task,
// corotask.send_to_task, corotask.send_to_key and corotask.cancel_task
// (usable from users' own functions and triggers), and two bookkeeping tables: corotask.migrations,
// which records the migrations applied, and corotask.function_files, which
// records the function files applied.
//
// Tables, columns, indexes and triggers change through versioned migrations
// (migrations/NNNN_name.sql), applied once each and never edited afterwards.
// Functions live in files per concern (functions/*.sql), each written with
// CREATE OR REPLACE: Migrate applies a function file again whenever its
// contents differ from those last applied, so a fix to a function is a change
// to its file, not a new migration.
//
// CheckSchema tells whether a build runs on a database's schema: executors
// and the CLI call it at start, and refuse a schema older than their build,
// or newer unless its migrations declare the build compatible (see
// Migration.CompatibleFrom).
package sql

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

//go:embed migrations/*.sql functions/*.sql
var files embed.FS

// Migration is one embedded schema migration.
type Migration struct {
	Version int    // from the file name's numeric prefix, applied in increasing order
	Name    string // the file name, e.g. "0001_init.sql"
	SQL     string
	// CompatibleFrom is the oldest build, named by its last migration, that
	// still runs correctly on the schema this migration leaves. A migration
	// declares it in a comment line of its header, "-- compatible-from: 8",
	// when it only adds what older builds ignore (a column with a default,
	// an index, a function); without it, it is Version: only builds that
	// know this migration run on it (see CheckSchema).
	CompatibleFrom int
}

// Checksum identifies the migration's contents (SHA-256, hex).
func (m Migration) Checksum() string { return checksum(m.SQL) }

// FunctionFile is one embedded file of SQL functions.
type FunctionFile struct {
	Name string // the file name, e.g. "commit.sql"
	SQL  string
}

// Checksum identifies the file's contents (SHA-256, hex).
func (f FunctionFile) Checksum() string { return checksum(f.SQL) }

func checksum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// lockKey is the advisory lock that serializes concurrent Migrate calls on one
// database ("corotask" in ASCII).
const lockKey = 0x636f726f7461736b

// Migrations returns the embedded migrations in the order they are applied.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(files, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: name must start with a positive version and '_'", e.Name())
		}
		body, err := fs.ReadFile(files, path.Join("migrations", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		from, err := parseCompatibleFrom(e.Name(), v, string(body))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(body), CompatibleFrom: from})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", out[i-1].Name, out[i].Name, out[i].Version)
		}
	}
	return out, nil
}

// FunctionFiles returns the embedded function files, in the order they are
// applied (by name).
func FunctionFiles() ([]FunctionFile, error) {
	entries, err := fs.ReadDir(files, "functions")
	if err != nil {
		return nil, fmt.Errorf("read embedded function files: %w", err)
	}
	out := make([]FunctionFile, 0, len(entries))
	for _, e := range entries {
		body, err := fs.ReadFile(files, path.Join("functions", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read function file %s: %w", e.Name(), err)
		}
		out = append(out, FunctionFile{Name: e.Name(), SQL: string(body)})
	}
	return out, nil
}

// Report says what a Migrate call applied; see Reporting.
type Report struct {
	// Migrations applied, in order; empty when the schema was up to date.
	Migrations []Migration
	// Functions are the function files applied, in order: those new or
	// changed since they were last applied, or all of them after a migration.
	Functions []FunctionFile
	// Version is the schema's version afterwards: the last migration applied.
	Version int
}

// Option configures Migrate.
type Option func(*options)

type options struct {
	report *Report
}

// Reporting makes Migrate fill r with what it applied.
func Reporting(r *Report) Option { return func(o *options) { o.report = r } }

// Migrate brings db's schema to this build's: it applies the embedded
// migrations that db has not applied yet, in order, then the function files
// that changed since they were last applied (all of them when a migration was
// applied), in one transaction. It is idempotent, and safe to run from
// several processes at once: an advisory lock makes them take turns.
//
// It refuses a database whose applied migrations differ from this build's
// (an edited migration), or that has applied a migration this build does not
// know (a database migrated by a newer build) unless every such migration
// declares that builds as old as this one still run on it (see
// Migration.CompatibleFrom): then it leaves the schema as it is, and returns
// nil. In a rolling deploy, a process of the older build that migrates at
// start keeps working on the newer schema.
func Migrate(ctx context.Context, db tasks.DB, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	migrations, err := Migrations()
	if err != nil {
		return err
	}
	functions, err := FunctionFiles()
	if err != nil {
		return err
	}
	var r Report
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		r = Report{}
		if _, err := tx.Exec(ctx, query.SchemaLock, int64(lockKey)); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, query.SchemaBookkeeping); err != nil {
			return fmt.Errorf("create bookkeeping tables: %w", err)
		}
		if r.Migrations, r.Version, err = applyMigrations(ctx, tx, migrations); err != nil {
			return err
		}
		if r.Functions, err = applyFunctions(ctx, tx, functions, len(r.Migrations) > 0); err != nil {
			return err
		}
		// On Citus, this build's claim function, and the plan settings
		// the functions just made need there.
		return citusFunctions(ctx, tx, false)
	})
	if err != nil {
		return err
	}
	if o.report != nil {
		*o.report = r
	}
	return nil
}

type appliedMigration struct {
	Version        int32
	Name           string
	Checksum       string
	CompatibleFrom *int32
}

// applyMigrations applies the migrations tx has not applied yet, and returns
// them and the schema's version afterwards.
func applyMigrations(ctx context.Context, tx pgx.Tx, all []Migration) ([]Migration, int, error) {
	rows, err := tx.Query(ctx, query.SchemaMigrationsApplied)
	if err != nil {
		return nil, 0, fmt.Errorf("read applied migrations: %w", err)
	}
	done, err := pgx.CollectRows(rows, pgx.RowToStructByPos[appliedMigration])
	if err != nil {
		return nil, 0, fmt.Errorf("read applied migrations: %w", err)
	}
	known := make(map[int]Migration, len(all))
	for _, m := range all {
		known[m.Version] = m
	}
	last := all[len(all)-1].Version
	have := make(map[int]appliedMigration, len(done))
	var newer Schema // the migrations applied past this build's last, if any
	refused := ""    // the first of them that this build may not run on
	for _, a := range done {
		if _, ok := known[int(a.Version)]; !ok {
			if int(a.Version) < last {
				return nil, 0, fmt.Errorf("the database has applied migration %s (version %d), which this build does not know though its last is version %d: the schema comes from another line of development; migrate it with the build that made it",
					a.Name, a.Version, last)
			}
			from := int(a.Version)
			if a.CompatibleFrom != nil {
				from = int(*a.CompatibleFrom)
			}
			if newer.Migration, newer.CompatibleFrom = int(a.Version), max(newer.CompatibleFrom, from); from > last {
				refused = a.Name
			}
			continue
		}
		have[int(a.Version)] = a
	}
	if refused != "" {
		return nil, 0, fmt.Errorf("the database has applied migration %s, which this build does not know: %w",
			refused, &SchemaError{Found: newer, Needed: BuildSchema(), Ahead: true})
	}
	var applied []Migration
	version := 0
	for _, m := range all {
		version = m.Version
		if a, ok := have[m.Version]; ok {
			// A migration edited after it was applied would leave this
			// database with a schema the code does not expect.
			if a.Checksum == "" {
				if _, err := tx.Exec(ctx, query.SchemaMigrationChecksum, m.Version, m.Checksum()); err != nil {
					return nil, 0, fmt.Errorf("record checksum of migration %s: %w", m.Name, err)
				}
			} else if a.Checksum != m.Checksum() {
				return nil, 0, fmt.Errorf("migration %s was applied (as %s) with different contents than this build's: the schema does not match the code; restore the migration or rebuild the database", m.Name, a.Name)
			}
			if a.CompatibleFrom == nil {
				if _, err := tx.Exec(ctx, query.SchemaMigrationCompatibleFrom, m.Version, m.CompatibleFrom); err != nil {
					return nil, 0, fmt.Errorf("record compatible-from of migration %s: %w", m.Name, err)
				}
			}
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, 0, fmt.Errorf("apply migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, query.SchemaMigrationRecord,
			m.Version, m.Name, m.Checksum(), m.CompatibleFrom); err != nil {
			return nil, 0, fmt.Errorf("record migration %s: %w", m.Name, err)
		}
		applied = append(applied, m)
	}
	return applied, max(version, newer.Migration), nil
}

// applyFunctions applies the function files whose contents differ from those
// recorded (every one when all is set), and returns them.
func applyFunctions(ctx context.Context, tx pgx.Tx, files []FunctionFile, all bool) ([]FunctionFile, error) {
	var newest int
	if err := tx.QueryRow(ctx, query.SchemaFunctionsNewestRelease).Scan(&newest); err != nil {
		return nil, fmt.Errorf("read applied function files: %w", err)
	}
	if newest > functionsRelease {
		// A newer build applied its functions: keep them (see functionsRelease).
		return nil, nil
	}
	rows, err := tx.Query(ctx, query.SchemaFunctionFiles)
	if err != nil {
		return nil, fmt.Errorf("read applied function files: %w", err)
	}
	recorded := map[string]string{}
	var name, sum string
	_, err = pgx.ForEachRow(rows, []any{&name, &sum}, func() error {
		recorded[name] = sum
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read applied function files: %w", err)
	}
	var applied []FunctionFile
	for _, f := range files {
		if !all && recorded[f.Name] == f.Checksum() {
			continue
		}
		if _, err := tx.Exec(ctx, f.SQL); err != nil {
			return nil, fmt.Errorf("apply function file %s: %w", f.Name, err)
		}
		if _, err := tx.Exec(ctx, query.SchemaFunctionFileRecord, f.Name, f.Checksum(), functionsRelease); err != nil {
			return nil, fmt.Errorf("record function file %s: %w", f.Name, err)
		}
		applied = append(applied, f)
	}
	return applied, nil
}
