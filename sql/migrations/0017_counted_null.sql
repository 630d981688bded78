-- corotask schema, version 17: tasks.counted is NULL where it was false. A
-- claim that counts toward its type's maximum sets it true; every other
-- task leaves it NULL (rows written before keep their false, which means
-- the same: only true counts).
--
-- Why: an UPDATE of corotask.tasks compares, for each column that an index
-- or an index's predicate names, the old and the new row's values, and a
-- column that follows a variable-width one, in a row with NULLs, is found
-- by walking every column before it. counted is the table's 32nd column
-- (tasks_running_counted_idx names it), so each claim and each commit of
-- every task walked the old and the new row to it, for types without flow
-- control too; a NULL is found from the row's null bitmap, without the
-- walk (see docs/benchmarks.md: the gain is within the noise of
-- `corotask bench oneshot` on its machine).
--
-- Builds of migrations 14 to 16 run on this schema: they count the claims
-- whose counted is true, as this build does, and write false for a claim
-- that does not count, which means the same. The renewal of an expired
-- claim that does not count (their "NOT t.counted") is refused on a NULL:
-- such a claim is then lost, and taken over, as a counted one is.
-- compatible-from: 14
--
-- Cost of the upgrade: two changes of the catalog (nothing rewritten or
-- scanned).

ALTER TABLE corotask.tasks
    ALTER COLUMN counted DROP NOT NULL,
    ALTER COLUMN counted DROP DEFAULT;

COMMENT ON COLUMN corotask.tasks.counted IS
'true while the running claim counts toward the type''s fleet-wide maximum (type_controls.max_running); set by the claim. NULL (or false) otherwise.';
