// Package heartbeat keeps an executor's claims alive. One Keeper per executor
// renews the claims of all its in-flight polls in a single statement per
// interval, and tells the executor at once when a claim is lost: the task was
// canceled, or another executor took it after this one's heartbeat went stale.
package heartbeat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/cause"
	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// Config configures a Keeper.
type Config struct {
	// Timeout is how long a claim lasts unless renewed: each renewal sets its
	// expiry (claim_expires_at) to now plus Timeout, and any executor may take
	// the task once it has passed. Default 30s.
	Timeout time.Duration
	// Interval between renewals; must be shorter than Timeout. Default
	// Timeout/3.
	Interval time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Renewed, if set, is called after each renewal Run makes, with how
	// many claims it renewed, how long it took and its error.
	Renewed func(ctx context.Context, claims int, took time.Duration, err error)
}

// SetDistributed tells the Keeper whether the tasks are distributed by
// Citus (see docs/scaling.md, "Citus"). Citus runs FOR UPDATE SKIP LOCKED
// only on one shard, and claims lie on many: there a renewal reads which
// shards hold the claims, then renews them shard by shard, each on its
// worker as on one server (query.RenewShard). Its connection must be one
// that runs nothing else (NewDedicated): Citus stops running such a call on
// the worker in a session that ran a commit.
func (k *Keeper) SetDistributed(on bool) { k.distributed.Store(on) }

// Claim identifies one claim on one task.
type Claim struct {
	Task  tasks.ID
	Token [16]byte
}

type entry struct {
	claim   Claim
	lost    func(cause error)
	renewed time.Time // local time the last successful renewal was sent
}

// ConnectFunc opens a connection for a Keeper's use alone.
type ConnectFunc func(ctx context.Context) (*pgx.Conn, error)

// Keeper renews claims. Its methods are safe for concurrent use.
type Keeper struct {
	db      tasks.DB    // shared: a pool, or the caller's connection
	connect ConnectFunc // or a connection of its own, opened by connect
	cfg     Config
	now     func() time.Time

	mu      sync.Mutex
	entries map[tasks.ID]*entry

	// renewing serializes renewals, and guards conn and the buffers a
	// renewal reuses: the claims it sends and the set of those renewed.
	renewing sync.Mutex
	conn     *pgx.Conn
	// distributed makes renewals go shard by shard (see SetDistributed).
	distributed atomic.Bool
	ids         uuids
	tokens      uuids
	renewed     map[tasks.ID]bool
}

// New returns a Keeper renewing claims through db. Through a pool, a renewal
// waits for a free connection like any other statement (never past the
// heartbeat timeout, see Renew); NewDedicated avoids that wait.
func New(db tasks.DB, cfg Config) *Keeper {
	k := newKeeper(cfg)
	k.db = db
	return k
}

// NewDedicated returns a Keeper renewing claims through a connection of its
// own, opened by connect when there is a claim to renew, and opened again
// after any error. A renewal then never waits behind other work for a
// connection. Close (or the end of Run) closes the connection.
func NewDedicated(connect ConnectFunc, cfg Config) *Keeper {
	k := newKeeper(cfg)
	k.connect = connect
	return k
}

func newKeeper(cfg Config) *Keeper {
	cfg.Timeout = cmp.Or(cfg.Timeout, 30*time.Second)
	cfg.Interval = cmp.Or(cfg.Interval, cfg.Timeout/3)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return &Keeper{cfg: cfg, now: time.Now, entries: map[tasks.ID]*entry{}}
}

// ConnectLike returns a ConnectFunc that opens connections to the server of
// pool, as pool opens its own (its connection settings and its BeforeConnect
// and AfterConnect hooks), but outside it: they count neither against its
// size nor wait for it.
func ConnectLike(pool *pgxpool.Pool) ConnectFunc {
	return func(ctx context.Context) (*pgx.Conn, error) {
		pc := pool.Config()
		cc := pc.ConnConfig
		if pc.BeforeConnect != nil {
			if err := pc.BeforeConnect(ctx, cc); err != nil {
				return nil, err
			}
		}
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			return nil, err
		}
		if pc.AfterConnect != nil {
			if err := pc.AfterConnect(ctx, conn); err != nil {
				conn.Close(context.Background())
				return nil, err
			}
		}
		return conn, nil
	}
}

// Close closes the keeper's own connection, if it has one open. A later
// renewal opens another.
func (k *Keeper) Close() {
	k.renewing.Lock()
	defer k.renewing.Unlock()
	k.dropConn()
}

// dropConn closes the keeper's own connection. k.renewing is held.
func (k *Keeper) dropConn() {
	if k.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = k.conn.Close(ctx)
		k.conn = nil
	}
}

// Add starts renewing c; claimedAt is the local time just before the claim
// was made. lost is called (once, from the keeper's goroutine)
// when the claim is lost or expires, with executor.ErrClaimLost,
// executor.ErrCanceled (the task was canceled) or executor.ErrRenewTimeout.
func (k *Keeper) Add(c Claim, claimedAt time.Time, lost func(cause error)) {
	k.mu.Lock()
	k.entries[c.Task] = &entry{claim: c, lost: lost, renewed: claimedAt}
	k.mu.Unlock()
}

// Remove stops renewing claim c; a newer claim of the same task is kept.
func (k *Keeper) Remove(c Claim) {
	k.mu.Lock()
	if e, ok := k.entries[c.Task]; ok && e.claim == c {
		delete(k.entries, c.Task) // not a newer claim of the same task
	}
	k.mu.Unlock()
}

// Len returns the number of claims being kept.
func (k *Keeper) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.entries)
}

// Run renews claims every Interval until ctx ends, then closes the keeper's
// own connection, if any. It returns an error at once if Interval is not
// positive and shorter than Timeout.
func (k *Keeper) Run(ctx context.Context) error {
	if k.cfg.Interval <= 0 || k.cfg.Interval >= k.cfg.Timeout {
		return fmt.Errorf("heartbeat: Config.Interval (%s) must be positive and shorter than Timeout (%s)", k.cfg.Interval, k.cfg.Timeout)
	}
	defer k.Close()
	t := time.NewTimer(k.cfg.Interval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, start := k.Len(), time.Now()
		err := k.Renew(ctx)
		if k.cfg.Renewed != nil && n > 0 {
			k.cfg.Renewed(ctx, n, time.Since(start), err)
		}
		next := k.cfg.Interval
		if err != nil && ctx.Err() == nil {
			// Tried again well before the next interval: claims last
			// Timeout from their last renewal, and a whole interval lost to
			// each failure would let two or three failures expire them.
			failures++
			next = min(next, retryDelay(failures))
			k.cfg.Logger.Warn("corotask: heartbeat renewal failed; retrying", "error", err, "claims", k.Len(), "retry_in", next)
		} else {
			failures = 0
		}
		t.Reset(max(next-time.Since(start), 0))
	}
}

// retryDelay is the wait before renewal attempt failures+1 after failed
// ones: 100 ms doubled per failure.
func retryDelay(failures int) time.Duration {
	return 100 * time.Millisecond << min(failures-1, 10)
}

// Renew renews every kept claim now, in one statement. Claims the database no
// longer matches are reported lost; claims that could not be renewed for
// longer than Timeout are reported expired.
//
// A renewal is given until the first of its claims would expire (its last
// successful renewal plus Timeout): if it has not finished by then (no free
// connection, a hung server or network, a lock), it is abandoned, and every
// claim whose Timeout has passed is reported expired at once rather than
// when the renewal eventually returns.
func (k *Keeper) Renew(ctx context.Context) error {
	k.renewing.Lock()
	defer k.renewing.Unlock()
	k.mu.Lock()
	ids, tokens := k.ids[:0], k.tokens[:0]
	sent := k.now()
	var deadline time.Time
	for _, e := range k.entries {
		ids = append(ids, e.claim.Task)
		tokens = append(tokens, tasks.ID(e.claim.Token))
		if exp := e.renewed.Add(k.cfg.Timeout); exp.After(sent) && (deadline.IsZero() || exp.Before(deadline)) {
			deadline = exp
		}
	}
	k.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	// Kept for the next renewal: one of 10,000 claims would otherwise leave
	// megabytes of garbage every Interval.
	k.ids, k.tokens = ids, tokens
	if k.renewed == nil {
		k.renewed = make(map[tasks.ID]bool, len(ids))
	}
	clear(k.renewed)
	if deadline.IsZero() {
		// Every claim has expired here (this process stalled); the database
		// may still say they are ours: one interval to find out.
		deadline = sent.Add(k.cfg.Interval)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	renewed := k.renewed
	renew := k.renewAll
	if k.distributed.Load() {
		renew = k.renewByShard
	}
	err := renew(ctx, renewed, ids, tokens)
	for tries := 1; err != nil && dberr.Severed(err) && ctx.Err() == nil && tries <= severedRetries; tries++ {
		// The connection was killed while it waited for this renewal (an
		// idle-session killer, a pooler's restart): at once on a new one.
		k.dropConn()
		clear(renewed)
		err = renew(ctx, renewed, ids, tokens)
	}
	var held, canceled map[tasks.ID]bool
	if err == nil && len(renewed) < len(ids) {
		held, canceled = map[tasks.ID]bool{}, map[tasks.ID]bool{}
		// Rare: tell the claims held by another transaction (still ours)
		// from those lost, for the tasks not renewed.
		var restIDs, restTokens uuids
		for i, id := range ids {
			if !renewed[id] {
				restIDs, restTokens = append(restIDs, id), append(restTokens, tokens[i])
			}
		}
		err = k.collect(ctx, held, query.HeartbeatHeld, restIDs, restTokens)
		if err == nil && len(held) < len(restIDs) {
			// A claim lost to a cancel whose notification has not arrived
			// yet says so, as the notification would.
			err = k.collect(ctx, canceled, query.HeartbeatCanceled, restIDs)
		}
	}
	var lost []*entry
	var causes []error
	k.mu.Lock()
	for i, id := range ids {
		e, ok := k.entries[id]
		if !ok || e.claim.Token != [16]byte(tokens[i]) {
			continue // finished (or re-claimed) while we renewed
		}
		switch {
		case renewed[id]: // renewed, even when another shard's renewal failed
			e.renewed = sent
		case err == nil && held[id] && k.now().Sub(e.renewed) < k.cfg.Timeout:
			// Busy in another transaction, but still ours: next time.
		case err == nil && held[id]:
			lost, causes = append(lost, e), append(causes, cause.RenewTimeout)
			delete(k.entries, id)
		case err == nil && canceled[id]:
			lost, causes = append(lost, e), append(causes, cause.Canceled)
			delete(k.entries, id)
		case err == nil:
			lost, causes = append(lost, e), append(causes, cause.ClaimLost)
			delete(k.entries, id)
		case k.now().Sub(e.renewed) >= k.cfg.Timeout:
			lost, causes = append(lost, e), append(causes, cause.RenewTimeout)
			delete(k.entries, id)
		}
	}
	k.mu.Unlock()
	for i, e := range lost {
		e.lost(causes[i])
	}
	if err != nil {
		if k.conn != nil {
			// Broken, or left mid-statement by the deadline: open another.
			// (pgx closes a connection whose statement's context ended, and
			// asks the server to cancel the statement.)
			k.dropConn()
		}
		return fmt.Errorf("renew %d claims: %w", len(ids), err)
	}
	return nil
}

// renewAll renews the claims ids, tokens in one statement, adding those
// renewed to out; none when it fails.
func (k *Keeper) renewAll(ctx context.Context, out map[tasks.ID]bool, ids, tokens uuids) error {
	err := k.collect(ctx, out, query.HeartbeatRenew, ids, tokens, k.cfg.Timeout.Seconds())
	if err != nil {
		clear(out) // the statement's rows read before it failed were not renewed
	}
	return err
}

// renewByShard is renewAll on a database whose tasks Citus distributes
// (see SetDistributed): one statement per shard, each committed on its own.
// A shard whose renewal fails (its worker down, its shard being moved) does
// not keep the others from being renewed: out holds what every other shard
// renewed, and the error joins the failures.
func (k *Keeper) renewByShard(ctx context.Context, out map[tasks.ID]bool, ids, tokens uuids) error {
	roots := map[tasks.ID]bool{}
	if err := k.collect(ctx, roots, query.CitusShardsOfTasks, ids); err != nil {
		return err
	}
	var errs []error
	shard := map[tasks.ID]bool{}
	for root := range roots {
		clear(shard)
		if err := k.collect(ctx, shard, query.RenewShard, root, ids, tokens, k.cfg.Timeout.Seconds()); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		maps.Copy(out, shard)
	}
	return errors.Join(errs...)
}

// severedRetries is how many times in a row a renewal whose connection was
// severed is tried again at once: through a pool, each may meet another
// connection killed while idle.
const severedRetries = 3

// collect runs a query that returns task IDs, and adds them to the set out.
// k.renewing is held.
func (k *Keeper) collect(ctx context.Context, out map[tasks.ID]bool, sql string, args ...any) error {
	db := k.db
	if k.connect != nil {
		if k.conn == nil {
			conn, err := k.connect(ctx)
			if err != nil {
				return fmt.Errorf("connect: %w", err)
			}
			k.conn = conn
		}
		db = k.conn
	}
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var id tasks.ID
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			return err
		}
		out[id] = true
	}
	return rows.Err()
}
