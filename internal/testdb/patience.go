package testdb

import "time"

// Patience is how long a test waits for something that should happen soon
// (a poll, a hook, a row, a log line) before it fails. It is minutes, not
// seconds: on a machine loaded far past its cores a -race build runs many
// times slower, and a test must fail only when the event never comes, never
// because the machine was slow. A passing test does not wait it out: it
// waits for the event, which ends the wait.
//
// Tests that need a claim to stay valid give it a HeartbeatTimeout longer
// than any stall (see LongHeartbeat), and make it expire on purpose, in the
// row, when they need it expired.
const Patience = 3 * time.Minute

// LongHeartbeat is a HeartbeatTimeout no stall of a loaded test machine
// reaches: a claim that must stay valid while a test runs gets it, so that
// only the test (by setting claim_expires_at back) makes it expire.
const LongHeartbeat = time.Hour
