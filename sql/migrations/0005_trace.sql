-- corotask schema, version 5: the trace context of the code that created a
-- task travels with the task (messages carry theirs in their envelope), so
-- that the spans of its polls can link to it.

ALTER TABLE corotask.tasks
    -- The W3C trace context ({"traceparent": ..., "tracestate": ...}) of the
    -- code that created the task; NULL when it was created outside a trace.
    ADD COLUMN trace jsonb;

-- Gains an optional trace; the function files create it again right after
-- the migrations. send_to_task and create_tasks keep their signatures (and
-- the privileges granted on them): their traced forms are new overloads.
DROP FUNCTION corotask.envelope(uuid, jsonb);
