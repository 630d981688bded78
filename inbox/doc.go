// Package inbox is how tasks receive messages: Send delivers one (from Go;
// corotask.send_to_task does the same from SQL), SendAsOperator delivers one
// and records it in the task's history (for operators' tools: corotask send,
// the web UI), and a poller reads its pending messages through an Inbox.
//
// A message sent to a task that is being polled goes to the task's
// inbox_next and reaches its inbox when that poll commits, so a committed
// poll never sees a message twice and no message is lost. Messages from one
// sender arrive in the order they were sent.
//
// A message that does not decode into the poller's message type (a poison
// message) does not fail the poll: it is delivered in its place, with
// Message.DecodeErr and Message.Raw set, and the poller pops it to drop it or
// leaves it. A task is never wedged by what someone sent it.
package inbox
