// Package query holds the SQL statements the library runs, each written
// once and named for what it does: the executor's claim and commits, the
// heartbeat's renewal, the task client's reads and operator calls, the web
// UI's and the CLI's listings and trees, Migrate's bookkeeping and the
// schema check. The library, the web UI, the CLI, the OpenTelemetry adapter
// and the test kit run these constants; none writes a statement of its own.
// Tests, benchmarks and the fault harness may: they check the library from
// outside.
//
// Conventions:
//
//   - A statement is an exported string constant, with a comment that says
//     what it does, its parameters and what it returns.
//   - Parameters are named (@name, bound with pgx.NamedArgs) where a
//     statement takes more than three; positional ($1..$3) otherwise.
//   - A fragment used by more than one statement (the status of a task, the
//     ready predicate, a task's columns) is a constant of its own, and the
//     statements are built from it by concatenation, at compile time.
//   - A task's status (Status) is the CASE of the SQL function
//     corotask.status, generated from sql/functions/api.sql by go generate
//     (a test fails when the two differ), but that it reads the executors
//     once per statement (Served) rather than for each task.
//   - The list of tasks, whose filters vary, is the one statement built at
//     run time: TaskList.SQL builds it, from constants.
//   - The public SQL API (create_task(s), send_to_task, cancel_task, the
//     operator functions) stays in sql/functions, where triggers can call it;
//     statements here call those functions rather than copy them.
//
// The package imports nothing of the module, so every package may use it.
package query
