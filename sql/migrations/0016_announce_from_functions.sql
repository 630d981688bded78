-- corotask schema, version 16: the functions announce the tasks they leave
-- ready, and the table's triggers no longer do. Executors LISTEN on
-- corotask_ready for the types of ready tasks; the two triggers on
-- corotask.tasks sent it for every row an UPDATE left ready (a plpgsql
-- call per row: about 15 µs for each delivered completion and each yield)
-- and for every INSERT statement (with a transition table of the rows
-- inserted). Now the functions that make a task ready (create_tasks,
-- send_to_key, deliver_all and deliver_one, commit_polls, release_claims,
-- fail_poll, the operator actions) call corotask.announce once per
-- statement with the types concerned (see functions/notify.sql).
--
-- On Citus a trigger on a distributed table fires on the worker that holds
-- the row, where no executor listens, and a NOTIFY there breaks the
-- two-phase commit of a transaction over two workers; the functions issue
-- it where they run.
--
-- What changes for users: an UPDATE of corotask.tasks written by hand no
-- longer announces the task; executors find it within their PollInterval.
--
-- Builds of migrations 14 and 15 run on this schema: none of their own
-- statements made a task ready (they call the functions for that, which
-- keep their signatures and now announce for them).
-- compatible-from: 14
--
-- Cost of the upgrade: dropping two triggers and their functions.

-- Only those that exist: a database distributed over Citus by hand before
-- this migration had them dropped already, and Citus refuses any DROP
-- TRIGGER on a distributed table, IF EXISTS included.
DO $$
DECLARE
    name text;
BEGIN
    FOR name IN SELECT tgname FROM pg_trigger
                WHERE tgrelid = 'corotask.tasks'::regclass
                  AND tgname IN ('tasks_announce_insert', 'tasks_announce_update')
    LOOP
        EXECUTE format('DROP TRIGGER %I ON corotask.tasks', name);
    END LOOP;
END
$$;
DROP FUNCTION IF EXISTS corotask.announce_created();
DROP FUNCTION IF EXISTS corotask.announce_ready();
