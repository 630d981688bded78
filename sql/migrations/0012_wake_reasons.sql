-- corotask schema, version 12: why a task is due. tasks.woke is a bitmask of
-- the reasons a task became ready, which the claim returns to the poll
-- (executor.Task.Woke):
--
--     1 created   no poll of the task has committed yet
--     2 message   a message that is not a completion arrived
--     4 child     a child's completion arrived
--     8 timer     the time its Sleep, SleepUntil or backoff asked for came
--    16 retry     its last poll failed (or its claim was taken over)
--    32 operator  an operator retried, restarted, set the state of or sent
--                 to the task
--    64 yield     its last poll yielded (or awaited with no child left)
--
-- The low byte holds the reasons gathered since the last claim; a claim
-- moves them to the high byte (woke << 8), where they stay while the poll
-- runs, so that what arrives during it is told apart and kept for the next
-- poll. A commit replaces them with what its action arms; a failure or a
-- release restores them, with retry for a failure.
--
-- Builds from migration 9 on run on this schema: their statements name the
-- columns they read and write, and the functions keep their signatures; a
-- task they claim keeps the reasons of before its claim, which only builds
-- of migration 12 read.
-- compatible-from: 9
--
-- Cost of the upgrade: adding a column with a constant default rewrites
-- nothing; the tasks that exist have no reason recorded (0).

ALTER TABLE corotask.tasks ADD COLUMN woke smallint NOT NULL DEFAULT 0;

COMMENT ON COLUMN corotask.tasks.woke IS
'Why the task is due (bitmask: 1 created, 2 message, 4 child, 8 timer, 16 retry, 32 operator, 64 yield): the low byte since the last claim, the high byte those of the claim in flight.';
