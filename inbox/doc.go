// Package inbox is how tasks receive messages: Send delivers one (from Go;
// corotask.send_to_task does the same from SQL), SendAsOperator delivers one
// and records it in the task's history (for operators' tools: corotask send,
// the web UI), SendToKey delivers one to the live task of a type with a key,
// creating it when there is none (corotask.send_to_key from SQL), and a
// poller reads its pending messages through an Inbox.
//
// Each message is a row of corotask.messages, keyed by the recipient's ID
// and its place in that task's inbox (seq, from 1, in the order delivered);
// the task's row keeps only counters. A send updates the recipient's row and
// inserts the message's row: it costs the same however many messages wait.
//
// A message sent to a task that is being polled counts in the task's
// inbox_next and joins its inbox when that poll commits, so a committed
// poll never sees a message twice and no message is lost. Messages from one
// sender arrive in the order they were sent.
//
// A poll is shown a window of its task's inbox, the oldest messages (at
// most 100 by default; see executor.InboxWindow), and Inbox.More reports
// whether more wait after them. A poll that pops its whole window while
// more wait is polled again at once with the next window, whatever it
// returned; one that leaves messages of its window keeps its action. Tests
// of pollers build an Inbox with Of, or with Partial for one whose More is
// true.
//
// A message that does not decode into the poller's message type (a poison
// message) does not fail the poll: it is delivered in its place, with
// Message.DecodeErr and Message.Raw set, and the poller pops it to drop it or
// leaves it. A task is never wedged by what someone sent it.
package inbox
