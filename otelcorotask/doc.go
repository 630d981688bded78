// Package otelcorotask exports what corotask executors do as OpenTelemetry
// metrics and traces. It implements executor.Hooks; applications that do not
// use OpenTelemetry do not import it, and pay nothing for it.
//
//	hooks, err := otelcorotask.New(otelcorotask.Config{DB: pool})
//	if err != nil {
//		return err
//	}
//	defer hooks.Close()
//	e, err := executor.New(pool, executor.Config{Hooks: hooks})
//
// The providers default to OpenTelemetry's global ones (otel.SetMeterProvider,
// otel.SetTracerProvider). One Hooks may serve every executor of a process.
//
// # Metrics
//
// Durations are in seconds. task.type is the type of the polled task (for
// messages sent and tasks created: of the task whose poll sent or created
// them).
//
//	name                             instrument  unit       attributes             meaning
//	corotask.polls                   counter     {poll}     task.type, outcome     polls settled, by outcome (below)
//	corotask.poll.duration           histogram   s          task.type, outcome     time a poll ran, not counting its commit
//	corotask.poll.failures           counter     {poll}     task.type, task.ended  polls recorded as failures (errors and panics)
//	corotask.poll.panics             counter     {poll}     task.type              polls that panicked
//	corotask.claim.duration          histogram   s          outcome                one claim statement (outcome ok or error)
//	corotask.claim.batch_size        histogram   {task}                            tasks one successful claim took
//	corotask.commit.duration         histogram   s          outcome                one commit statement
//	corotask.commit.batch_size       histogram   {poll}                            polls one commit statement carried
//	corotask.claims.lost             counter     {claim}    task.type, cause       polls whose claim this executor lost
//	corotask.claims.taken_over       counter     {claim}    task.type              tasks this executor took over from an expired claim
//	corotask.messages.sent           counter     {message}  task.type              messages sent by committed polls
//	corotask.tasks.created           counter     {task}     task.type              child tasks spawned by committed polls
//	corotask.tasks.eager             counter     {task}                            children created claimed by this executor, polled without a claim
//	corotask.heartbeat.duration      histogram   s          outcome                one renewal of the claims in flight
//	corotask.tasks.ready             gauge       {task}     task.type              ready tasks, all executors together
//	corotask.tasks.ready.oldest_age  gauge       s          task.type              wait of the oldest ready task past its wake_at
//
// docs/operations.md says more of each. Outcomes of corotask.polls
// (executor.PollOutcome): committed, failed,
// panicked, claim_lost, canceled, released (the executor stopped and gave
// the claim back), superseded (the poll returned done while messages
// arrived: nothing kept, polled again), abandoned (the outcome could not be written; the task
// is polled again once its claim goes stale).
//
// Causes of corotask.claims.lost: taken_over (the heartbeat found the claim
// replaced: another executor took the task, or it was canceled while this
// executor missed the cancel notification), expired (the heartbeat could not
// be renewed within the heartbeat timeout), fenced (the commit found the
// claim gone). corotask.claims.taken_over is counted by the executor that
// takes a task over from an expired claim (its holder crashed, was killed or
// stalled), so the tasks of a crashed executor count too.
// corotask.poll.failures has task.ended=true when
// the failure ended the task for good.
//
// # Ready tasks
//
// The two gauges are computed by one query over the ready-tasks index (of at
// most Config.ReadyLimit entries, the oldest), run at most once per
// Config.ReadyInterval by each process, when the gauges are collected and
// their values are older than that; collections in between read the last
// values. Each process reports the same fleet-wide values: aggregate them
// with max, not sum.
//
// # Traces
//
// Each poll is a span named "corotask.poll <task type>" (kind consumer), the
// root of its trace (a poll may run days after what made its task ready, and
// never belongs to the trace of the code that started the executor), whose
// context is the poll's: spans the poller starts are its children. Attributes:
// corotask.task.id, corotask.task.type, corotask.task.parent_id (children
// only), corotask.task.key (tasks with a key, see tasks.Spec.Key),
// corotask.poll.attempt (1, or one more than the failures before
// it), corotask.poll.outcome, corotask.poll.action (when the poll returned
// one), corotask.poll.spawned and corotask.poll.sent (committed polls). A
// poll that did not commit records its error and has status Error.
//
// A poll's span links to the spans in which its task was created and its
// inbox's messages were sent, when they kept a trace context: tasks.Create,
// tasks.CreateMany and inbox.Send keep that of their context, which WithTrace
// attaches from the context's span:
//
//	id, err := tasks.Create(otelcorotask.WithTrace(ctx), db, spec)
//
// The children a poll spawns and the messages it sends keep the trace
// context of the poll's span, so their polls link back to it. Trace contexts
// are stored in W3C's format (propagation.TraceContext), whatever the global
// propagator.
package otelcorotask
