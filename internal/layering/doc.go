// Package layering holds the test of the module's import rules: the library
// packages import one way (executor -> heartbeat, inbox, sql, tasks;
// heartbeat, inbox, sql -> tasks; tasks -> nothing of the module but
// internal helpers, among them internal/query, which holds the SQL;
// schedule -> executor, inbox, tasks, and no library package imports it), and a program that imports only the library (executor,
// heartbeat, inbox, sql, tasks) pulls in neither the web UI nor
// OpenTelemetry: those live in packages of their own (ui, otelcorotask) that
// a user imports on purpose.
package layering
