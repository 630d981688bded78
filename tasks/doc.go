// Package tasks is the lowest layer of corotask: task identifiers and types,
// the stored Task record and its derived Status, and the client functions
// that create, read, list and cancel tasks.
//
// Every function takes a DB, which may be a *pgxpool.Pool, a *pgx.Conn or the
// caller's own pgx.Tx: creating a task inside the transaction that also writes
// the application's rows makes both happen, or neither.
//
// The schema these functions use is created by the sql package's Migrate.
package tasks
