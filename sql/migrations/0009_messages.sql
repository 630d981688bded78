-- corotask schema, version 9: messages are rows of their own. A task's
-- inbox and inbox_next were jsonb[] columns of its row: every send, and
-- every completion delivered to a parent, rewrote the whole array (and its
-- TOAST) under the task's row lock, and every claim shipped the whole inbox.
-- Now each message is a row of corotask.messages, keyed by its recipient and
-- its place in the recipient's inbox (seq, from 1, in the order delivered),
-- and the task row keeps only counters: a send, a completion and a pop cost
-- the same whatever the number of messages waiting, and a poll reads a
-- bounded window of its inbox.
--
-- A task's messages are those of corotask.messages with its task_id and a
-- seq above msg_popped; the last inbox_next_len of them (seq above
-- msg_seq - inbox_next_len) arrived while an executor held the task: they
-- are its inbox_next, the others its inbox. A message leaves the table when
-- a poll that popped it commits, when an operator drops it, or with its task
-- (retention).
--
-- The table holds no foreign key to corotask.tasks: a send writes the
-- recipient's row anyway (its counters, its wake_at), and the check would
-- cost every message a probe and a lock of that row. The message rows of a
-- task live with it: a later split of the tables by workflow tree keeps a
-- send on one node.
--
-- Cost of the upgrade: one pass over the tasks that hold messages, and a
-- rewrite-free drop of the two columns (their space is reclaimed as the rows
-- are next updated, or by VACUUM FULL).

CREATE TABLE corotask.messages (
    task_id  uuid   NOT NULL,
    seq      bigint NOT NULL,
    envelope jsonb  NOT NULL,
    PRIMARY KEY (task_id, seq)
);

COMMENT ON TABLE corotask.messages IS
'The messages waiting in tasks'' inboxes, one row each: task_id is the recipient, seq its place in the recipient''s inbox (from 1, in the order delivered), envelope the message as sent (from, body, at, trace).';

-- Rows are inserted and deleted, never updated: vacuum early, so that the
-- space of popped messages is reused rather than grown.
ALTER TABLE corotask.messages SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.05
);

ALTER TABLE corotask.tasks
    ADD COLUMN msg_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN msg_popped bigint NOT NULL DEFAULT 0,
    ADD COLUMN inbox_len integer NOT NULL DEFAULT 0,
    ADD COLUMN inbox_next_len integer NOT NULL DEFAULT 0,
    ADD COLUMN next_wakes boolean NOT NULL DEFAULT false,
    -- A counter that went below zero would hide messages from every later
    -- claim: refused, loudly, instead.
    ADD CONSTRAINT inbox_counts_valid CHECK (inbox_len >= 0 AND inbox_next_len >= 0 AND msg_popped <= msg_seq);

COMMENT ON COLUMN corotask.tasks.msg_seq IS
'The seq of the last message delivered to the task (0: none): the next one gets msg_seq + 1.';
COMMENT ON COLUMN corotask.tasks.msg_popped IS
'Every message of the task with a seq up to this one has been popped by a committed poll.';
COMMENT ON COLUMN corotask.tasks.inbox_len IS
'How many of the task''s messages are in its inbox (waiting for its next poll, or given to the running one).';
COMMENT ON COLUMN corotask.tasks.inbox_next_len IS
'How many messages arrived while an executor held the task: the last ones by seq. They join the inbox when the poll ends.';
COMMENT ON COLUMN corotask.tasks.next_wakes IS
'A message that arrived while an executor held the task would wake it were it awaiting its children: anything but the completion of a child that ended with a result.';

-- The inbox first, then inbox_next, each in its order: seq follows both.
INSERT INTO corotask.messages (task_id, seq, envelope)
SELECT t.task_id, m.seq, m.envelope
FROM corotask.tasks t
CROSS JOIN LATERAL unnest(t.inbox || t.inbox_next) WITH ORDINALITY AS m(envelope, seq)
WHERE cardinality(t.inbox) + cardinality(t.inbox_next) > 0;

UPDATE corotask.tasks t SET
    msg_seq = cardinality(t.inbox) + cardinality(t.inbox_next),
    inbox_len = cardinality(t.inbox),
    inbox_next_len = cardinality(t.inbox_next),
    next_wakes = EXISTS (SELECT 1 FROM unnest(t.inbox_next) AS m(e) WHERE NOT m.e ? 'done' OR m.e ? 'err')
WHERE cardinality(t.inbox) + cardinality(t.inbox_next) > 0;

ALTER TABLE corotask.tasks DROP COLUMN inbox, DROP COLUMN inbox_next;

COMMENT ON TABLE corotask.tasks IS
'Durable coroutine-style tasks. Executors claim ready tasks (or tasks whose claim expired), poll them and commit the new state fenced on "claim". A task''s messages are rows of corotask.messages; those that arrive while it is being polled count in inbox_next_len and join its inbox when the poll commits.';

-- commit_polls now names the messages each poll popped by their seqs; its
-- earlier forms (and the forms kept for executors of older releases) go.
DROP FUNCTION IF EXISTS corotask.commit_polls(uuid[], uuid[], jsonb[], integer[], text[], float8[],
    timestamptz[], jsonb[], jsonb[], smallint[], integer, integer);
DROP FUNCTION IF EXISTS corotask.commit_polls(uuid[], uuid[], jsonb[], integer[], text[], float8[],
    timestamptz[], jsonb[], jsonb[], smallint[], integer, integer, uuid[]);
DROP FUNCTION IF EXISTS corotask.commit_polls(uuid[], uuid[], jsonb[], integer[], text[], float8[],
    timestamptz[], jsonb[], jsonb[], smallint[], integer, integer, uuid[], uuid, float8);

-- The messages belong to the tasks' owner, who owns the SECURITY DEFINER
-- functions that write them (create_tasks, send_to_task, ...), whoever runs
-- the migration.
DO $$
BEGIN
    EXECUTE format('ALTER TABLE corotask.messages OWNER TO %I',
        (SELECT pg_get_userbyid(c.relowner) FROM pg_class c WHERE c.oid = 'corotask.tasks'::regclass));
END
$$;

-- Every role keeps on the messages the privileges it holds on the tasks
-- (an executor's role reads, writes and deletes them; an operator's reads
-- them), so that a deployment with least-privilege roles runs on as before.
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT a.privilege_type, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END AS grantee
        FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) AS a
        LEFT JOIN pg_roles r ON r.oid = a.grantee
        WHERE c.oid = 'corotask.tasks'::regclass AND a.grantee <> c.relowner
          AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE')
    LOOP
        EXECUTE format('GRANT %s ON corotask.messages TO %s', g.privilege_type, g.grantee);
    END LOOP;
END
$$;
