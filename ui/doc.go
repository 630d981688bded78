// Package ui is corotask's web UI: an http.Handler that a service mounts
// under a prefix, and that `corotask ui` serves on its own.
//
// The pages are rendered on the server (html/template) from one read-only
// snapshot of the database each, with a little JavaScript; the assets are
// embedded, so nothing needs building. The pages are:
//
//   - the overview: tasks by type and status, what each type ended and
//     failed over the last hour (per 5 minutes) and how long its oldest
//     ready task has waited (the lag), and the tasks that are failing or
//     failed lately;
//   - the tasks: filtered by type, status, parent, failing and creation
//     time, newest or oldest first, one page at a time by keyset on the
//     task ID (never OFFSET), with counts by status;
//   - a task: its state and result as formatted JSON, its inbox and
//     inbox_next with senders and times, its history as a timeline (errors,
//     stacks, executors, operator actions and messages), the executor holding
//     it, its children with their statuses and the parent's fan-in progress,
//     and the forms of the actions;
//   - the executors: live or gone, the types they serve, their load;
//   - a workflow's tree.
//
// Every page updates itself while it is open: the browser keeps a
// server-sent events stream, on which the handler reads the page again every
// Config.RefreshInterval and sends its changing part when it changed.
//
// # Counts at scale
//
// While corotask.tasks holds fewer than Config.CountThreshold rows (the
// planner's estimate), every count is exact. Above it, running tasks are
// still counted exactly (their partial index holds only them, as many as the
// executors run), and so are the tasks that wait for a time (ready,
// sleeping) while the claim's index holds fewer than 10000 of them; the
// others (suspended, ended, and the throughput of the last hour) are
// estimated from a block sample of about 20000 rows (TABLESAMPLE SYSTEM), and
// shown with "≈". A page's cost then stays bounded whatever the size of the
// table.
//
// # Actions and their safety
//
// A task's page has forms that send it a message (checked to be JSON in the
// browser and again on the server), cancel it, retry it now, restart it
// (failed), or drop a message from its inbox. All but the message are the
// tasks package's operator actions; the message is sent with
// inbox.SendAsOperator. Each is recorded in the task's history, with the
// database role of the handler's pool. Each
// asks for a confirmation on a page of its own before anything is done; a
// refusal (bad JSON, an ended, unknown or running task, a status that does
// not allow the action) is shown on the task's page, and nothing changes. Every form carries a token drawn when the handler is made, and the
// handler refuses a form without it, or one that a browser says was posted
// from another site (http.CrossOriginProtection). Config.ReadOnly removes the
// forms and refuses the actions.
//
// The handler does no authentication and no authorization: wrap it in the
// mounting service's middleware, as the example shows. It never shows the
// database's connection string.
package ui
