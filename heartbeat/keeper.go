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
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/corotask/corotask/tasks"
)

// ErrClaimLost is the cause given to a poll's cancel function when its claim
// no longer matches the database: the task was canceled, released, or claimed
// by another executor after a stall.
var ErrClaimLost = errors.New("claim lost: the task was canceled or claimed by another executor")

// ErrRenewTimeout is the cause given when the claim could not be renewed
// (database errors) for longer than the heartbeat timeout: by then another
// executor may own the task, so the poll must stop.
var ErrRenewTimeout = errors.New("claim expired: heartbeat could not be renewed within the heartbeat timeout")

// Config configures a Keeper.
type Config struct {
	// Timeout is how old a heartbeat may get before another executor may take
	// the task. Default 30s.
	Timeout time.Duration
	// Interval between renewals. Default Timeout/3.
	Interval time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

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

// Keeper renews claims. Its methods are safe for concurrent use.
type Keeper struct {
	db  tasks.DB
	cfg Config
	now func() time.Time

	mu      sync.Mutex
	entries map[tasks.ID]*entry
}

// New returns a Keeper renewing claims through db.
func New(db tasks.DB, cfg Config) *Keeper {
	cfg.Timeout = cmp.Or(cfg.Timeout, 30*time.Second)
	cfg.Interval = cmp.Or(cfg.Interval, cfg.Timeout/3)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return &Keeper{db: db, cfg: cfg, now: time.Now, entries: map[tasks.ID]*entry{}}
}

// Add starts renewing c; claimedAt is the local time just before the claim
// was made. lost is called (once, from the keeper's goroutine or from Lose)
// when the claim is lost or expires, with ErrClaimLost or ErrRenewTimeout.
func (k *Keeper) Add(c Claim, claimedAt time.Time, lost func(cause error)) {
	k.mu.Lock()
	k.entries[c.Task] = &entry{claim: c, lost: lost, renewed: claimedAt}
	k.mu.Unlock()
}

// Remove stops renewing the claim of task.
func (k *Keeper) Remove(task tasks.ID) {
	k.mu.Lock()
	delete(k.entries, task)
	k.mu.Unlock()
}

// Lose reports the claim of task lost with cause (e.g. a cancellation heard
// through NOTIFY), calls its lost function and stops renewing it. It reports
// whether task was being kept.
func (k *Keeper) Lose(task tasks.ID, cause error) bool {
	k.mu.Lock()
	e, ok := k.entries[task]
	delete(k.entries, task)
	k.mu.Unlock()
	if ok {
		e.lost(cause)
	}
	return ok
}

// Len returns the number of claims being kept.
func (k *Keeper) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.entries)
}

// Run renews claims every Interval until ctx ends.
func (k *Keeper) Run(ctx context.Context) error {
	t := time.NewTicker(k.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := k.Renew(ctx); err != nil && ctx.Err() == nil {
			k.cfg.Logger.Warn("corotask: heartbeat renewal failed; retrying", "error", err, "claims", k.Len())
		}
	}
}

// Renew renews every kept claim now, in one statement. Claims the database no
// longer matches are reported lost; claims that could not be renewed for
// longer than Timeout are reported expired.
func (k *Keeper) Renew(ctx context.Context) error {
	k.mu.Lock()
	ids := make([]tasks.ID, 0, len(k.entries))
	tokens := make([]pgtype.UUID, 0, len(k.entries))
	for _, e := range k.entries {
		ids = append(ids, e.claim.Task)
		tokens = append(tokens, pgtype.UUID{Bytes: e.claim.Token, Valid: true})
	}
	k.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	sent := k.now()
	// A row another transaction holds (the poll's own commit, most likely) is
	// skipped rather than waited for: a renewal never blocks, so it cannot
	// deadlock with commits. A skipped claim that still matches is kept and
	// tried again at the next interval.
	renewed, err := k.collect(ctx, `WITH locked AS MATERIALIZED (
			SELECT t.task_id FROM unnest($1::uuid[], $2::uuid[]) AS c(task_id, claim)
			JOIN corotask.tasks t ON t.task_id = c.task_id AND t.claim = c.claim
			FOR UPDATE OF t SKIP LOCKED
		)
		UPDATE corotask.tasks t SET heartbeat = now()
		FROM locked WHERE t.task_id = locked.task_id
		RETURNING t.task_id`, ids, tokens)
	var held map[tasks.ID]bool
	if err == nil && len(renewed) < len(ids) {
		// Rare: tell the claims held by another transaction (still ours)
		// from those lost, for the tasks not renewed.
		var restIDs []tasks.ID
		var restTokens []pgtype.UUID
		for i, id := range ids {
			if !renewed[id] {
				restIDs, restTokens = append(restIDs, id), append(restTokens, tokens[i])
			}
		}
		held, err = k.collect(ctx, `SELECT t.task_id FROM unnest($1::uuid[], $2::uuid[]) AS c(task_id, claim)
			JOIN corotask.tasks t ON t.task_id = c.task_id AND t.claim = c.claim`, restIDs, restTokens)
	}
	var lost []*entry
	var causes []error
	k.mu.Lock()
	for i, id := range ids {
		e, ok := k.entries[id]
		if !ok || e.claim.Token != tokens[i].Bytes {
			continue // finished (or re-claimed) while we renewed
		}
		switch {
		case err == nil && renewed[id]:
			e.renewed = sent
		case err == nil && held[id] && k.now().Sub(e.renewed) < k.cfg.Timeout:
			// Busy in another transaction, but still ours: next time.
		case err == nil && held[id]:
			lost, causes = append(lost, e), append(causes, ErrRenewTimeout)
			delete(k.entries, id)
		case err == nil:
			lost, causes = append(lost, e), append(causes, ErrClaimLost)
			delete(k.entries, id)
		case k.now().Sub(e.renewed) >= k.cfg.Timeout:
			lost, causes = append(lost, e), append(causes, ErrRenewTimeout)
			delete(k.entries, id)
		}
	}
	k.mu.Unlock()
	for i, e := range lost {
		e.lost(causes[i])
	}
	if err != nil {
		return fmt.Errorf("renew %d claims: %w", len(ids), err)
	}
	return nil
}

// collect runs a query that returns task IDs, and returns them as a set.
func (k *Keeper) collect(ctx context.Context, sql string, args ...any) (map[tasks.ID]bool, error) {
	rows, err := k.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[tasks.ID]bool{}
	var id tasks.ID
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}
