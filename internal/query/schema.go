package query

// The statements of Migrate and of the schema check (package sql), and of
// the database resolution that creates a database when asked.

// SchemaLock serializes migrations, whichever process runs them: an
// advisory lock held to the end of the migration's transaction. $1 is the
// lock's key.
const SchemaLock = `SELECT pg_advisory_xact_lock($1)`

// SchemaBookkeeping creates the tables that record what Migrate applied.
const SchemaBookkeeping = `CREATE SCHEMA IF NOT EXISTS corotask;
	CREATE TABLE IF NOT EXISTS corotask.migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	);
	-- Added after the first release of this table; NULL: not recorded.
	ALTER TABLE corotask.migrations ADD COLUMN IF NOT EXISTS checksum text;
	-- The migration's CompatibleFrom; NULL: not recorded, its version.
	ALTER TABLE corotask.migrations ADD COLUMN IF NOT EXISTS compatible_from integer;
	CREATE TABLE IF NOT EXISTS corotask.function_files (
		name       text        PRIMARY KEY,
		checksum   text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	);
	-- The functionsRelease of the build that applied the file; 0 before it
	-- was recorded.
	ALTER TABLE corotask.function_files ADD COLUMN IF NOT EXISTS release integer NOT NULL DEFAULT 0;
	-- Every role that uses the schema checks, at start, that it is the one
	-- its build needs (CheckSchema).
	GRANT SELECT ON corotask.migrations, corotask.function_files TO PUBLIC`

// SchemaMigrationsApplied lists the migrations applied: version, name,
// checksum (empty when not recorded) and compatible_from (NULL when not
// recorded), by version.
const SchemaMigrationsApplied = `SELECT version, name, coalesce(checksum, ''), compatible_from FROM corotask.migrations ORDER BY version`

// SchemaMigrationChecksum records the checksum of migration $1: $2.
const SchemaMigrationChecksum = `UPDATE corotask.migrations SET checksum = $2 WHERE version = $1`

// SchemaMigrationCompatibleFrom records the compatible-from of migration
// $1: $2.
const SchemaMigrationCompatibleFrom = `UPDATE corotask.migrations SET compatible_from = $2 WHERE version = $1`

// SchemaMigrationRecord records migration version $1, named $2, of
// checksum $3 and compatible-from $4, as applied.
const SchemaMigrationRecord = `INSERT INTO corotask.migrations (version, name, checksum, compatible_from) VALUES ($1, $2, $3, $4)`

// SchemaFunctionsNewestRelease is the newest release of the function
// files applied (0 when none is recorded).
const SchemaFunctionsNewestRelease = `SELECT coalesce(max(release), 0) FROM corotask.function_files`

// SchemaFunctionFiles lists the function files applied: name and checksum.
const SchemaFunctionFiles = `SELECT name, checksum FROM corotask.function_files`

// SchemaFunctionFileRecord records function file $1, of checksum $2, as
// applied by release $3.
const SchemaFunctionFileRecord = `INSERT INTO corotask.function_files (name, checksum, release) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, release = excluded.release, applied_at = now()`

// SchemaTablesExist says whether the bookkeeping tables exist: migrations,
// then function_files.
const SchemaTablesExist = `SELECT to_regclass('corotask.migrations') IS NOT NULL,
		to_regclass('corotask.function_files') IS NOT NULL`

// SchemaVersion is the schema's version (its newest migration) and the
// oldest build's version that runs on it (the highest compatible-from). The
// columns added to the bookkeeping tables over time are read through
// to_jsonb, so that the tables of any earlier build can be read.
const SchemaVersion = `SELECT coalesce(max(version), 0),
		coalesce(max(coalesce((to_jsonb(m) ->> 'compatible_from')::int, version)), 0)
		FROM corotask.migrations m`

// SchemaFunctionsRelease is the newest release of the function files
// applied, read through to_jsonb (see SchemaVersion).
const SchemaFunctionsRelease = `SELECT coalesce(max((to_jsonb(f) ->> 'release')::int), 0)
		FROM corotask.function_files f`

// DatabaseExists says whether database $1 exists on the server.
const DatabaseExists = `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`

// DatabaseCreate creates a database; the caller appends its name, quoted
// as an identifier (CREATE DATABASE takes no parameter).
const DatabaseCreate = `CREATE DATABASE `

// BackendPID is the server process of the session: the pooler check compares
// them across transactions (a pooler in transaction mode changes them).
const BackendPID = `SELECT pg_backend_pid()`

// ClockSet sets the session's corotask.now, the time corotask.now() returns
// (see sql/functions/api.sql), to $1 (text, RFC 3339): the test kit's clock.
const ClockSet = `SELECT set_config('corotask.now', $1, false)`
