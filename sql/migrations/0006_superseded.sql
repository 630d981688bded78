-- corotask schema, version 6: a poll that returns done while messages arrive
-- for its task is superseded: nothing of it is kept, and the task is polled
-- again at once with those messages. commit_polls says which polls were
-- superseded (its result type changes; the function file creates it again
-- right after the migrations; a database created from scratch has none to
-- drop yet), and the history records them.

DROP FUNCTION IF EXISTS corotask.commit_polls(uuid[], uuid[], jsonb[], integer[], text[], float8[],
    timestamptz[], jsonb[], jsonb[], smallint[], integer, integer);

ALTER TABLE corotask.history DROP CONSTRAINT history_outcome_valid,
    ADD CONSTRAINT history_outcome_valid CHECK (outcome IN ('committed', 'failed', 'panicked',
        'claim_lost', 'canceled', 'taken_over', 'released', 'operator', 'superseded'));
