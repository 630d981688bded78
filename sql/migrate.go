// Package sql holds corotask's schema migrations, embedded in the binary, and
// applies them.
//
// Everything corotask stores lives in the PostgreSQL schema "corotask": the
// table corotask.tasks, the SQL functions corotask.create_task,
// corotask.send_to_task and corotask.cancel_task (usable from users' own
// functions and triggers), and corotask.migrations, which records the
// migrations applied.
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

	"github.com/corotask/corotask/tasks"
)

//go:embed migrations/*.sql
var files embed.FS

// Migration is one embedded schema migration.
type Migration struct {
	Version int    // from the file name's numeric prefix, applied in increasing order
	Name    string // the file name, e.g. "0001_init.sql"
	SQL     string
}

// Checksum identifies the migration's contents (SHA-256, hex).
func (m Migration) Checksum() string {
	sum := sha256.Sum256([]byte(m.SQL))
	return hex.EncodeToString(sum[:])
}

type appliedMigration struct {
	Version  int32
	Name     string
	Checksum string
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
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", out[i-1].Name, out[i].Name, out[i].Version)
		}
	}
	return out, nil
}

// Migrate applies the embedded migrations that db has not applied yet, in
// order, in one transaction. It is idempotent, and safe to run from several
// processes at once: an advisory lock makes them take turns.
func Migrate(ctx context.Context, db tasks.DB) error {
	_, err := Apply(ctx, db)
	return err
}

// Apply is Migrate, and also returns the migrations it applied (none when the
// schema was up to date).
func Apply(ctx context.Context, db tasks.DB) ([]Migration, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	var applied []Migration
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(lockKey)); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS corotask;
			CREATE TABLE IF NOT EXISTS corotask.migrations (
				version    integer     PRIMARY KEY,
				name       text        NOT NULL,
				applied_at timestamptz NOT NULL DEFAULT now()
			);
			-- Added after the first release of this table; NULL: not recorded.
			ALTER TABLE corotask.migrations ADD COLUMN IF NOT EXISTS checksum text`); err != nil {
			return fmt.Errorf("create migrations table: %w", err)
		}
		rows, err := tx.Query(ctx, "SELECT version, name, coalesce(checksum, '') FROM corotask.migrations")
		if err != nil {
			return fmt.Errorf("read applied migrations: %w", err)
		}
		done, err := pgx.CollectRows(rows, pgx.RowToStructByPos[appliedMigration])
		if err != nil {
			return fmt.Errorf("read applied migrations: %w", err)
		}
		have := make(map[int]appliedMigration, len(done))
		for _, a := range done {
			have[int(a.Version)] = a
		}
		for _, m := range all {
			if a, ok := have[m.Version]; ok {
				// A migration edited after it was applied would leave this
				// database with a schema the code does not expect.
				if a.Checksum == "" {
					if _, err := tx.Exec(ctx, "UPDATE corotask.migrations SET checksum = $2 WHERE version = $1", m.Version, m.Checksum()); err != nil {
						return fmt.Errorf("record checksum of migration %s: %w", m.Name, err)
					}
				} else if a.Checksum != m.Checksum() {
					return fmt.Errorf("migration %s was applied (as %s) with different contents than this build's: the schema does not match the code; restore the migration or rebuild the database", m.Name, a.Name)
				}
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO corotask.migrations (version, name, checksum) VALUES ($1, $2, $3)", m.Version, m.Name, m.Checksum()); err != nil {
				return fmt.Errorf("record migration %s: %w", m.Name, err)
			}
			applied = append(applied, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}
