package query

// VacuumNeeded reports whether table $1 needs vacuuming by hand: the
// server's autovacuum is off, and dead rows are at least 1,000 and more
// than a tenth of the live ones.
const VacuumNeeded = `SELECT current_setting('autovacuum') = 'off'
				AND s.n_dead_tup >= 1000 AND s.n_dead_tup > s.n_live_tup / 10
			FROM pg_stat_user_tables s WHERE s.relid = $1::regclass`

// VacuumLock tries the session advisory lock $1 that serializes vacuuming
// between executors; returns whether it got it. VacuumUnlock releases it.
const (
	VacuumLock   = "SELECT pg_try_advisory_lock($1)"
	VacuumUnlock = "SELECT pg_advisory_unlock($1)"
)

// VacuumAnalyze is followed by the name of the table to vacuum (one of
// corotask's own, never an input).
const VacuumAnalyze = "VACUUM (ANALYZE) "
