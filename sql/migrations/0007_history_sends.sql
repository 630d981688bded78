-- corotask schema, version 7: a message an operator sends (corotask send, the
-- web UI's form: corotask.operator_send) is recorded in the task's history.
--
-- A send is no attempt: it is allowed while an executor holds the task (the
-- message waits in inbox_next), so it cannot raise the task's attempt number
-- as the other operator actions do; the running poll's commit writes the row
-- of that attempt. A history row is therefore keyed by its attempt and a
-- sequence number within it: 0 for the attempt's own row (a poll, or an
-- operator action that raised the attempt number), 1, 2, ... for the
-- messages operators sent during or after that attempt, in order. Every
-- writer but operator_send leaves seq at its default, 0.
--
-- Cost of the upgrade: the primary key's index is built again, under a lock
-- that makes polls that record history wait until it is built (about a
-- second per million rows of corotask.history).

ALTER TABLE corotask.history
    ADD COLUMN seq integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT history_seq_valid CHECK (seq = 0 OR (seq > 0 AND outcome = 'operator' AND action = 'send')),
    DROP CONSTRAINT history_pkey,
    ADD CONSTRAINT history_pkey PRIMARY KEY (task_id, attempt, seq);

COMMENT ON COLUMN corotask.history.seq IS
'0 for an attempt''s own row (a poll, or an operator action); 1, 2, ... for the messages operators sent during or after that attempt, in order.';
