// Package schedule runs tasks on a schedule (cron or @every, in a time
// zone), with schedules that are tasks themselves.
//
// A schedule is a task of type corotask.schedule whose key is the
// schedule's name. Its poller, registered on an executor with Register,
// wakes at each slot of its cron, spawns one child task of the target type
// per slot due (per its missed-run policy) and records the last slot in its
// state in the same commit, then sleeps until the next slot. A poll's
// effects commit together and fenced on its claim, so each slot creates one
// task, whatever executors crash or race: a poll that does not commit
// spawns nothing and records nothing, and the next one decides again.
//
// Each child has the schedule as its parent (it shows in the schedule's
// tree) and the key "NAME@SLOT", the schedule's name and the slot's time in
// RFC 3339 in the schedule's zone: two schedules that start tasks of one
// type at the same time do not contend for a key.
//
// Ensure creates or updates a schedule, Pause, Resume, Delete and Backfill
// send it messages, List lists them; all of them work from any process
// with a database pool, executor or not.
//
// # Missed slots
//
// A slot is missed when a later slot is also due by the time the schedule
// is polled (its executors were stopped, it was retried, ...). Missed
// decides: MissedSkip runs none of them (a slot runs only when it is the
// only one due), MissedOnce (the default) runs the latest one once,
// MissedAll runs every one, at most MaxMissed (the latest ones). Slots not
// run are counted in Info.Skipped.
//
// # No overlap
//
// With NoOverlap, a slot does not start while the task of the slot before
// is live: the schedule learns that its child ended from the completion
// message a parent receives. A slot due meanwhile is skipped (counted in
// Info.Skipped), never run late; and a catch-up runs only the latest slot.
//
// # Pause, resume, delete, backfill
//
// A paused schedule runs nothing and waits (suspended) for a message; on
// Resume it runs from the next slot after now, and the slots of the pause
// are not run (nor counted). Delete ends the schedule's task (its name is
// then free); its children live on. Backfill runs every slot of a time
// range that is due, whatever Missed, NoOverlap and Paused say.
package schedule
