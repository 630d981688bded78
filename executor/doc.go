// Package executor runs tasks: it claims ready tasks of the types registered
// with it, polls them with typed pollers, and commits each poll's outcome.
//
// # Writing a poller
//
// A poller for tasks of one type implements Poller[S, M], where S is the
// task's durable state (JSON) and M the type its messages decode into:
//
//	type counter struct{ Total int }
//
//	executor.Register(e, "billing.counter", executor.PollerFunc[counter, int](
//		func(ctx context.Context, t *executor.Task[counter, int]) (executor.Action, error) {
//			for {
//				m, ok := t.Inbox.Pop()
//				if !ok {
//					break
//				}
//				t.State.Total += m.Body
//			}
//			return executor.Suspend(), nil // until the next message
//		}))
//
// A poll returns an Action: Yield, Sleep, SleepUntil, Suspend,
// AwaitChildren, Done or DoneWith. It may Spawn children, Send messages and
// register OnCommit work; all of it, with the new State and the popped
// messages, is committed in one transaction when the poll returns, or none
// of it when the poll fails.
//
// # Messages and the inbox window
//
// A task's messages are rows of corotask.messages, keyed by the recipient's
// ID and their place in its inbox (seq, from 1, in the order delivered); the
// task's row keeps only counters. A send or a child's completion writes the
// recipient's row and inserts the message rows, and a commit deletes the
// rows its poll popped, so none of them costs more when many messages wait.
//
// A poll is shown a window of its inbox: the oldest messages, at most
// DefaultInboxWindow (100), or what InboxWindow sets for its type (up to
// MaxInboxWindow). Task.Inbox.More reports whether more wait after them. A
// poll that pops every message of its window while more wait is committed
// as a Yield, whatever it returned, and the task is polled again at once
// with the next window: a Done then does not end the task (its result is
// dropped, the rest committed as for a Yield) and the next poll decides
// again. A poll that leaves messages of its window unpopped keeps
// its action: a poller that never pops does not see past its window.
//
// # Why a poll woke
//
// Task.Woke says what made the task due since its last committed poll, as
// WakeReasons: its first poll (First), a message (Message), a child's
// completion (Child), the time of its Sleep, SleepUntil or backoff
// (Timer), a failed last poll (Retry), an operator's action (Operator) or
// a Yield. Several may be set: a message that arrives after a Sleep's time
// came gives Message and Timer; one that wakes the task before it gives
// Message alone. A failed poll commits nothing, so its retry sees its
// reasons still, with Retry. The reasons live in the task's row, written by
// the statements that write it anyway, and the claim returns them: they
// cost no statement.
//
// Receive builds a receive with a timeout on the task's durable state: it
// pops the next message, or returns the action that waits for one until a
// deadline kept in the state, or reports that the deadline passed. The
// deadline survives every other wake (a child's completion, a Yield, a
// retry), as the state does.
//
// # The lifecycle of a poll
//
//  1. Claim. One statement takes up to the free slots of ready tasks
//     (wake_at passed, not running) and of tasks whose heartbeat is older
//     than HeartbeatTimeout, with SELECT ... FOR UPDATE SKIP LOCKED, gives
//     each a fresh claim token and reads the window of its inbox the poll is
//     shown. The executor LISTENs for corotask_ready notifications and
//     claims within milliseconds of a task becoming ready; it also looks
//     every PollInterval and at the next known wake_at.
//  2. Poll. While it runs, the heartbeat keeper renews the claims of all
//     in-flight polls in one statement per HeartbeatInterval. If a claim is
//     lost (the task was canceled, or taken by another executor after this
//     one stalled) or cannot be renewed within HeartbeatTimeout, the poll's
//     context is canceled with ErrClaimLost, ErrCanceled or
//     ErrRenewTimeout as its cause; past its type's PollTimeout, with
//     ErrPollTimeout.
//  3. Commit. One transaction, fenced on the claim token: if the claim no
//     longer matches, nothing is written. Otherwise the state is saved; the
//     messages the poll popped are deleted, and those that arrived during
//     the poll (inbox_next) join the inbox after the ones it left; wake_at
//     follows the action (a Yield if the poll popped its whole window while
//     more wait; at once if messages arrived during the poll); children are
//     created, messages sent and OnCommit functions run; a finished task's
//     parent gets its completion message.
//  4. Failure. An error or panic (or effects the database refuses, such as a
//     message to an ended task, or a poll past its type's PollTimeout,
//     whatever it returns) commits nothing of the poll: failures goes up,
//     last_error is recorded, and the task sleeps for a capped, jittered
//     exponential backoff. With MaxFailures, the task ends as failed after
//     that many consecutive failures and its parent is told. An error
//     wrapped in Fail ends the task so at once, whatever MaxFailures says:
//     the poller knows that retrying cannot help (a declined card, a
//     malformed request). A panic or a timeout is never final by itself.
//
// # Guarantees
//
//   - A task is polled by at most one executor at a time while its claim is
//     valid, and only a poll that still holds its claim can commit.
//   - Every message sent to a task is seen by exactly one committed poll, or
//     is still in the task's inbox: none is lost when an executor crashes, a
//     poll fails, a claim is stolen or PostgreSQL restarts. Messages from one
//     sender arrive in the order sent. A poll sees at most its window, the
//     oldest messages; one that pops its whole window while more wait is
//     polled again, so it cannot end its task with messages it was never
//     shown.
//   - Polls run at least once: a poll may run again for the same state and
//     messages (after a crash, a failure, a lost claim), so work it does
//     outside the commit must be idempotent. What it writes through OnCommit
//     (and its state, spawns and sends) is committed exactly once.
//   - When a task ends (done, failed after MaxFailures or by Fail, or
//     canceled) its parent, if still alive, receives exactly one completion
//     message.
//
// # Schema
//
// Run and PollOnce first check that the database's schema is one this build
// runs on (sql.CheckSchema): on a database without the corotask schema, or
// one older or newer than this build runs on, they claim and poll nothing
// and return a *sql.SchemaError that says what to do (run `corotask migrate`,
// or upgrade corotask). An error of class 42 from corotask's own statements
// (an undefined function, table or column: the schema changed under a
// running executor) is never counted against a task: the claim is given
// back and Run stops and returns it. See "Rolling deploys" in
// docs/operations.md.
//
// # Stopping
//
// When Run's context ends, the executor stops claiming, lets in-flight polls
// finish for up to ShutdownTimeout, then cancels them (cause ErrShutdown) and
// releases their claims, so another executor can take the tasks at once
// rather than after HeartbeatTimeout.
//
// # Testing pollers
//
// PollOnce claims what is ready now, polls it and commits, with no
// background loops: a deterministic step for tests. TryPoll runs one poll
// on a state and messages the test gives and returns what it would commit,
// without a database. Package corotasktest has the rest of a test kit.
package executor
