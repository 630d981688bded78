package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/query"
)

// Errors Run returns when a connection pooler between the executor and
// PostgreSQL (PgBouncer in transaction or statement mode) cannot carry what
// the executor's settings need. Each error Run returns says what to change.
var (
	// ErrListenUnreachable: LISTEN/NOTIFY does not reach the executor.
	ErrListenUnreachable = errors.New("LISTEN/NOTIFY does not reach this executor")
	// ErrPreparedStatementsLost: the pool's query mode relies on statements
	// prepared on a connection, which the pooler does not keep.
	ErrPreparedStatementsLost = errors.New("prepared statements do not survive between transactions")
	// ErrTransactionsRefused: the pool refuses transaction blocks.
	ErrTransactionsRefused = errors.New("the pool refuses transactions")
)

// sessions is what probeSessions found about the pool's connections.
type sessions struct {
	// shared: two pool connections reached one server session, or one pool
	// connection reached two: a pooler hands server connections out per
	// transaction.
	shared bool
	// preparedLost: a statement prepared on a pool connection was gone from
	// its next transaction.
	preparedLost bool
}

// checkPooler refuses, at Run start, the settings that cannot work behind
// the pool: LISTEN, and the query modes that keep statements prepared on a
// connection from one transaction to the next, when a pooler shares server
// connections between clients (PgBouncer in transaction mode, before 1.21
// for prepared statements); and any pool that refuses transactions
// (PgBouncer in statement mode). What it cannot find out (the database is
// down) is logged and left to the executor's retries.
func checkPooler(ctx context.Context, v *env) error {
	mode := v.pool.Config().ConnConfig.DefaultQueryExecMode
	s, err := probeSessions(ctx, v.pool)
	switch {
	case errors.Is(err, ErrTransactionsRefused):
		return fmt.Errorf("executor: %w; corotask commits in transactions: behind PgBouncer use pool_mode = transaction or session", err)
	case err != nil && ctx.Err() != nil:
		return nil // Run is stopping already
	case err != nil:
		v.log.Warn("corotask: could not check the pool for a connection pooler; going on", "error", err)
		return nil
	case s.shared && !v.cfg.DisableListen:
		return fmt.Errorf("executor: %w: the pool's connections do not keep their server session (a pooler such as PgBouncer in transaction mode), so LISTEN holds on no connection; set Config.DisableListen", ErrListenUnreachable)
	case s.preparedLost && mode == pgx.QueryExecModeCacheStatement,
		s.shared && mode == pgx.QueryExecModeDescribeExec:
		return fmt.Errorf("executor: %w: the pool's connections do not keep their server session (a pooler such as PgBouncer in transaction mode), and default_query_exec_mode %s needs them to; set default_query_exec_mode=cache_describe in the URL (pgx.QueryExecModeCacheDescribe)", ErrPreparedStatementsLost, strings.ReplaceAll(mode.String(), " ", "_"))
	}
	if !v.cfg.DisableListen {
		return checkListen(ctx, v.pool, v.log, listenProbeTimeout)
	}
	return nil
}

// probeRounds bounds probeSessions' rounds: each round finds transaction
// pooling for certain when the pooler gives B the server connection A
// released last, as PgBouncer does when no other client takes it first.
const probeRounds = 3

// probeMu serializes probeSessions, which holds two connections at once.
var probeMu sync.Mutex

// probeSessions finds out whether two connections of pool share a server
// session between their transactions, as a pooler in transaction mode makes
// them do, and whether a statement prepared on one connection is still there
// in a later transaction. Connection A prepares a statement and runs it; B
// then holds a transaction open; A runs a statement, then its prepared one
// again. Without a pooler, A and B are two server sessions throughout. Behind
// PgBouncer in transaction mode, B is given the server connection A released
// last, unless another client took it first: then A must run elsewhere, and
// its prepared statement is gone unless the pooler prepares it again for A
// (PgBouncer 1.21 and later, with max_prepared_statements). A round that
// finds neither is tried again, up to probeRounds. An error that wraps
// ErrTransactionsRefused is definitive; any other means the probe could not
// run.
func probeSessions(ctx context.Context, pool *pgxpool.Pool) (sessions, error) {
	var s sessions
	if pool.Config().MaxConns < 2 {
		return s, nil
	}
	// One probe at a time in the process: executors that start together
	// on one pool would otherwise each hold a connection and wait for a
	// second (four executors on a pool of four, for ever).
	probeMu.Lock()
	defer probeMu.Unlock()
	a, err := pool.Acquire(ctx)
	if err != nil {
		return s, err
	}
	defer a.Release()
	b, err := pool.Acquire(ctx)
	if err != nil {
		return s, err
	}
	defer b.Release()
	name := "corotask_probe_" + randomHex()
	pa := a.Conn().PgConn()
	if _, err := pa.Prepare(ctx, name, query.BackendPID, nil); err != nil {
		return s, err
	}
	// Not left on a session of the server: deallocated on the connection it
	// is on now, if that is where it was prepared.
	defer func() { _ = pa.Deallocate(context.WithoutCancel(ctx), name) }()
	for range probeRounds {
		pinned, err := probeRound(ctx, a, b, name, &s)
		if err != nil || pinned || s.preparedLost {
			return s, err
		}
	}
	return s, nil
}

// probeRound runs one round of probeSessions, and reports whether B held
// A's server connection, which makes the round conclusive.
func probeRound(ctx context.Context, a, b *pgxpool.Conn, name string, s *sessions) (pinned bool, err error) {
	pa := a.Conn().PgConn()
	pidA, err := runPrepared(ctx, pa, name)
	if lost(err) {
		// Prepared in one transaction, gone in a later one.
		s.shared, s.preparedLost = true, true
		return false, nil
	}
	if err != nil {
		return false, err
	}

	tx, err := b.Begin(ctx)
	if err != nil {
		return false, refused(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var pidB int32
	if err := tx.QueryRow(ctx, query.BackendPID, pgx.QueryExecModeSimpleProtocol).Scan(&pidB); err != nil {
		return false, refused(err)
	}

	var pidA2 int32
	if err := a.QueryRow(ctx, query.BackendPID, pgx.QueryExecModeSimpleProtocol).Scan(&pidA2); err != nil {
		return false, err
	}
	pinned = pidB == pidA
	if pinned || pidA2 != pidA {
		s.shared = true
	}
	if _, err := runPrepared(ctx, pa, name); lost(err) {
		s.shared, s.preparedLost = true, true
	} else if err != nil {
		return false, err
	}
	return pinned, nil
}

// runPrepared runs the prepared statement name (SELECT pg_backend_pid())
// and returns the pid.
func runPrepared(ctx context.Context, pc *pgconn.PgConn, name string) (int32, error) {
	res := pc.ExecPrepared(ctx, name, nil, nil, []int16{pgx.TextFormatCode}).Read()
	if res.Err != nil {
		return 0, res.Err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return 0, errors.New("probe: no pid")
	}
	var pid int32
	if _, err := fmt.Sscan(string(res.Rows[0][0]), &pid); err != nil {
		return 0, fmt.Errorf("probe: pid %q: %w", res.Rows[0][0], err)
	}
	return pid, nil
}

// refused marks the error PgBouncer in statement mode gives a transaction
// block: 08P01, "transaction blocks not allowed in statement pooling mode".
// PgBouncer gives 08P01 for passing trouble too ("server login has been
// failing, try again later" while PostgreSQL restarts): only the words tell
// them apart.
func refused(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "08P01" && strings.Contains(pgErr.Message, "statement pooling") {
		return fmt.Errorf("%w: %w", ErrTransactionsRefused, err)
	}
	return err
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lost reports whether err says that a prepared statement does not exist.
func lost(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "26000" // invalid_sql_statement_name
}
