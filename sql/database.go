package sql

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/corotask/corotask/internal/query"
)

// maintenanceDatabases are the databases [EnsureDatabase] connects to, in
// this order, to create a database that does not exist: PostgreSQL's
// maintenance database, and template1 on a server that has none.
var maintenanceDatabases = []string{"postgres", "template1"}

// PostgreSQL error codes EnsureDatabase tells apart.
const (
	codeInvalidCatalogName    = "3D000" // the database connected to does not exist
	codeDuplicateDatabase     = "42P04" // CREATE DATABASE of one that exists
	codeUniqueViolation       = "23505" // CREATE DATABASE racing another
	codeInsufficientPrivilege = "42501" // the role may not create databases
	pgDatabaseNameIndex       = "pg_database_datname_index"
)

// EnsureDatabase creates the database that connection string url names
// (a URL, a keyword/value string, or "" for libpq's PG* environment, as
// pgx.ParseConfig reads them) when it does not exist, and says whether it
// did. It first connects to that database: when it exists, nothing else is
// done, so a role that may not connect to the maintenance database can
// still call it. Else it connects with the same server and credentials to
// the server's maintenance database (postgres, else template1 on a server
// that has no postgres) and runs CREATE DATABASE, quoting the name: the
// database is owned by the role, made from the server's default template. Another process
// creating the same database at the same time is no error: one of them
// reports it created.
//
// A role that may not create databases gets an error that says so. A
// failed connection's error wraps pgconn.ConnectError.
func EnsureDatabase(ctx context.Context, url string) (created bool, err error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return false, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return false, conn.Close(context.WithoutCancel(ctx))
	}
	if !isCode(err, codeInvalidCatalogName) {
		return false, err
	}
	name := cfg.Database
	admin, err := connectMaintenance(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer admin.Close(context.WithoutCancel(ctx))
	var exists bool
	err = admin.QueryRow(ctx, query.DatabaseExists, name).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("look for database %s: %w", name, err)
	}
	if exists {
		return false, nil
	}
	_, err = admin.Exec(ctx, query.DatabaseCreate+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &pgErr) && (pgErr.Code == codeDuplicateDatabase ||
		pgErr.Code == codeUniqueViolation && pgErr.ConstraintName == pgDatabaseNameIndex):
		return false, nil // created meanwhile by another
	case errors.As(err, &pgErr) && pgErr.Code == codeInsufficientPrivilege:
		return false, fmt.Errorf("database %s does not exist and role %s may not create it: "+
			"create it, or use a database that exists: %w", name, cfg.User, err)
	}
	return false, fmt.Errorf("create database %s: %w", name, err)
}

// connectMaintenance connects as cfg does, but to the first of
// maintenanceDatabases that exists.
func connectMaintenance(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	var err error
	for _, db := range maintenanceDatabases {
		c := cfg.Copy()
		c.Database = db
		var conn *pgx.Conn
		if conn, err = pgx.ConnectConfig(ctx, c); err == nil {
			return conn, nil
		}
		if !isCode(err, codeInvalidCatalogName) {
			break
		}
	}
	return nil, fmt.Errorf("database %s does not exist, and connecting to the server to create it failed: %w", cfg.Database, err)
}

// isCode says whether err holds a PostgreSQL error of code.
func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}
