package faults

import (
	"context"
	"fmt"

	"github.com/corotask/corotask/tasks"
)

// ledgerSQL creates the ledger. No table has a unique constraint: a message
// sent or consumed twice, or a poll committed twice, must show up as two rows
// for Check to count, not be refused.
const ledgerSQL = `
CREATE SCHEMA IF NOT EXISTS faults;
-- One row per message sent, written in the same transaction as the send: by
-- the sending poll's OnCommit, or by the harness with inbox.Send.
CREATE TABLE IF NOT EXISTS faults.sent (
    msg_id    text        NOT NULL,
    to_task   uuid        NOT NULL,
    from_task uuid,
    kind      text        NOT NULL,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS sent_msg_idx ON faults.sent (msg_id);
-- One row per message popped by a committed poll (OnCommit).
CREATE TABLE IF NOT EXISTS faults.consumed (
    msg_id  text        NOT NULL,
    task_id uuid        NOT NULL,
    poll_id uuid        NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS consumed_msg_idx ON faults.consumed (msg_id);
-- One row per committed poll (OnCommit). seq is the task's poll counter as
-- the poll saw it plus one: committed polls of one task must number 1, 2, 3...
-- started_at is the worker's clock when the poll began, committed_at the
-- server's clock inside the commit transaction (one machine, one clock).
CREATE TABLE IF NOT EXISTS faults.polls (
    poll_id      uuid        NOT NULL,
    task_id      uuid        NOT NULL,
    seq          integer     NOT NULL,
    executor     text        NOT NULL,
    started_at   timestamptz NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS polls_task_idx ON faults.polls (task_id, seq);
-- What a poller saw that must not happen (a message out of order, a second
-- completion from one child...), written by the poll that saw it.
CREATE TABLE IF NOT EXISTS faults.anomalies (
    task_id uuid,
    poll_id uuid,
    what    text        NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);`

// CreateLedger creates the ledger tables (schema faults) in db.
func CreateLedger(ctx context.Context, db tasks.DB) error {
	if _, err := db.Exec(ctx, ledgerSQL); err != nil {
		return fmt.Errorf("create ledger: %w", err)
	}
	return nil
}

// recordSQL writes what one committed poll did, in one statement, inside the
// poll's commit transaction. Data-modifying CTEs all run, referenced or not.
const recordSQL = `
WITH p AS (
    INSERT INTO faults.polls (poll_id, task_id, seq, executor, started_at)
    VALUES ($1, $2, $3, $4, $5)
), c AS (
    INSERT INTO faults.consumed (msg_id, task_id, poll_id)
    SELECT m, $2, $1 FROM unnest($6::text[]) AS m
), s AS (
    INSERT INTO faults.sent (msg_id, to_task, from_task, kind)
    SELECT u.id, u.dest, $2, u.kind FROM unnest($7::text[], $8::uuid[], $9::text[]) AS u(id, dest, kind)
), a AS (
    INSERT INTO faults.anomalies (task_id, poll_id, what)
    SELECT $2, $1, w FROM unnest($10::text[]) AS w
)
SELECT 1`

// undistribute makes the tables of a Citus run that the checks read local
// to the coordinator again, once its workers have stopped: the checks then
// read the tasks, messages and history as they ended, and join them with
// the ledger (the coordinator's own tables), which Citus refuses over
// distributed tables. (control_history, which they
// do not read, stays: Citus cannot undistribute its identity column.)
func undistribute(ctx context.Context, db tasks.DB) error {
	_, err := db.Exec(ctx, `SELECT set_config('client_min_messages', 'warning', false),
		(SELECT count(undistribute_table(t::regclass)) FROM unnest(ARRAY['corotask.history', 'corotask.messages', 'corotask.tasks',
			'corotask.executors', 'corotask.type_controls', 'corotask.key_limits', 'corotask.rate_limits',
			'corotask.key_windows']) AS t)`)
	if err != nil {
		return fmt.Errorf("faults: make the tables local again for the checks: %w", err)
	}
	return nil
}
