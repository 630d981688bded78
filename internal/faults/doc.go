// Package faults is corotask's fault-injection harness: it proves the
// guarantees of DESIGN.md ("Guarantees") while executors crash, lose their
// connections, stall, and PostgreSQL restarts under them.
//
// A run (see Run) starts several worker processes, each running one
// corotask executor (see RunWorker) against one database, with a workload of
// parent/child task trees whose tasks exchange messages. Every message
// carries a unique ID, and every poll records in a ledger, through OnCommit
// and so inside its commit transaction, which messages it consumed and sent.
// The workload runs under flow-control limits (a maximum of running nodes,
// a limit per tree in a key space, priorities, which each worker's
// priority slots claim beside its claim loop): a sampler in the harness's
// process reads the running claims every few milliseconds and reports the
// most it saw beside each limit (see Limits).
// While the workload runs, the harness injects faults: SIGKILL of workers at
// random moments and at chosen points (in a poll, inside the commit
// transaction), SIGSTOP of whole workers past the heartbeat timeout,
// pg_terminate_backend of their connections, PostgreSQL restarts (fast and
// immediate), and pollers that fail, panic or stall at random.
//
// At the end, Check reads the ledger and the tasks table and reports every
// violation: a task that did not end, a message lost or consumed twice, a
// message sent twice, two committed polls of one task that overlapped,
// a parent that did not get exactly one completion per child, messages from
// one sender out of order, a limit exceeded.
//
// The test in this package (TestFaults) runs a short version by default;
// docs/guarantees.md says how to run a long one.
package faults
