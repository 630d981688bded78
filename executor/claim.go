package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/corotask/corotask/internal/claimsql"
	"github.com/corotask/corotask/tasks"
)

// claimRequest says how many tasks to claim, and of which types.
type claimRequest struct {
	total  int
	open   []string // types without a concurrency cap
	capped []string // types with a cap and free slots ...
	caps   []int32  // ... and how many each may take
	all    []string // every type with a free slot (for stale claims)
	stale  bool     // look for stale claims too
}

// request computes what the next claim may take from the free slots.
func (e *Executor) request() claimRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	// Up to Concurrency polls run, and up to Concurrency more may be
	// settling (committing); both hold claims the keeper renews.
	r := claimRequest{total: min(e.cfg.Concurrency-e.polling, 2*e.cfg.Concurrency-len(e.inflight))}
	if r.total <= 0 {
		return claimRequest{}
	}
	for typ, h := range e.handlers {
		limit := h.options().concurrency
		if limit == 0 {
			r.open = append(r.open, string(typ))
			r.all = append(r.all, string(typ))
			continue
		}
		if free := limit - e.perType[typ]; free > 0 {
			r.capped = append(r.capped, string(typ))
			r.caps = append(r.caps, int32(min(free, r.total)))
			r.all = append(r.all, string(typ))
		}
	}
	if len(r.all) == 0 {
		return claimRequest{}
	}
	// Stale claims are rare (a crashed or stalled executor) and looking for
	// them scans the index of running tasks, so it is done once per
	// PollInterval rather than at every claim.
	if now := time.Now(); now.Sub(e.lastStaleCheck) >= e.cfg.PollInterval {
		r.stale, e.lastStaleCheck = true, now
	}
	return r
}

// claim claims what req allows, and returns the claimed tasks and the
// earliest future wake_at (zero if none is known). The claim runs in its own
// transaction on its generic plan (see claimsql.GenericPlan); the four
// statements go to the server as one pipeline, so the claim costs a single
// round trip.
func (e *Executor) claim(ctx context.Context, req claimRequest) ([]*claimed, time.Time, error) {
	at := time.Now()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(claimsql.GenericPlan)
	b.Queue(claimsql.SQL[req.stale], req.open, req.total, req.capped, req.caps,
		e.cfg.HeartbeatTimeout.Seconds(), req.all)
	b.Queue("COMMIT")
	br := e.pool.SendBatch(ctx, b)
	out, next, err := readClaim(br, at)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	e.hooks.claimDone(ctx, at, &req, len(out), err)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: %w", tasks.TranslateError(err))
	}
	return out, next, nil
}

// readClaim reads the results of the claim's pipeline. The claimed rows
// count only once the COMMIT has succeeded.
func readClaim(br pgx.BatchResults, at time.Time) ([]*claimed, time.Time, error) {
	for range 2 { // BEGIN, SET LOCAL
		if _, err := br.Exec(); err != nil {
			return nil, time.Time{}, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, time.Time{}, err
	}
	defer rows.Close()
	var out []*claimed
	var next time.Time
	for rows.Next() {
		var (
			id       tasks.ID
			typ      *string
			c        claimed
			token    pgtype.UUID
			failures *int32
			wake     *time.Time
		)
		if err := rows.Scan(&id, &typ, &c.parent, &c.state, &c.inbox, &token, &failures, &wake); err != nil {
			return nil, time.Time{}, err
		}
		if typ == nil {
			if wake != nil {
				next = *wake
			}
			continue
		}
		c.id, c.typ, c.claim, c.failures, c.claimedAt = id, tasks.Type(*typ), token.Bytes, int(*failures), at
		out = append(out, &c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, err
	}
	if _, err := br.Exec(); err != nil { // COMMIT
		return nil, time.Time{}, err
	}
	return out, next, nil
}
