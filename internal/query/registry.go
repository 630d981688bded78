package query

// RegistrySeen inserts or refreshes an executor's row in corotask.executors
// (see corotask.executor_seen): its host, pid, version, types and
// concurrency, live for @expires_in; the rows of executors gone more than
// @keep ago (NULL: kept) are deleted. Returns nothing.
const RegistrySeen = `SELECT corotask.executor_seen(
    p_executor    => @executor,
    p_host        => @host,
    p_pid         => @pid,
    p_version     => @version,
    p_types       => @types,
    p_concurrency => @concurrency,
    p_expires_in  => @expires_in,
    p_keep        => @keep)`

// RegistryStopped marks executor $1 stopped (see corotask.executor_stopped).
const RegistryStopped = `SELECT corotask.executor_stopped($1)`
