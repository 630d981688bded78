package executor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

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
	r := claimRequest{total: e.cfg.Concurrency - len(e.inflight)}
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

// claimSQL claims, in one statement, up to $2 tasks: ready tasks of the
// uncapped types $1 (oldest wake_at first), ready tasks of each capped type
// $3 up to its free slots $4, and tasks of any type $6 whose heartbeat is
// older than $5 seconds (their executor died or stalled). A claimed task gets
// a fresh claim token, and any inbox_next a dead poll left joins its inbox.
// The last row (task_id NULL) carries the earliest future wake_at of those
// types, so the executor knows when to look again.
var claimSQL = map[bool]string{true: claimSQLTemplate, false: strings.Replace(claimSQLTemplate, staleCTE, noStaleCTE, 1)}

const staleCTE = `stale AS (
    SELECT task_id FROM corotask.tasks
    WHERE heartbeat <> '0001-01-01 00:00:00+00' AND heartbeat < now() - make_interval(secs => $5)
      AND done_at IS NULL AND task_type = ANY($6::text[])
    ORDER BY heartbeat
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)`

const noStaleCTE = `stale AS (SELECT task_id FROM corotask.tasks WHERE false AND $5::float8 > 0)`

const claimSQLTemplate = `
WITH open_ready AS (
    SELECT task_id FROM corotask.tasks
    WHERE heartbeat = '0001-01-01 00:00:00+00' AND done_at IS NULL AND wake_at IS NOT NULL
      AND wake_at <= now() AND task_type = ANY($1::text[])
    ORDER BY wake_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), capped_ready AS (
    SELECT r.task_id FROM unnest($3::text[], $4::int[]) AS q(typ, n)
    CROSS JOIN LATERAL (
        SELECT task_id FROM corotask.tasks
        WHERE heartbeat = '0001-01-01 00:00:00+00' AND done_at IS NULL AND wake_at IS NOT NULL
          AND wake_at <= now() AND task_type = q.typ
        ORDER BY wake_at
        LIMIT q.n
        FOR UPDATE SKIP LOCKED
    ) r
), ` + staleCTE + `, picked AS (
    SELECT task_id FROM (
        SELECT task_id FROM stale
        UNION ALL SELECT task_id FROM open_ready
        UNION ALL SELECT task_id FROM capped_ready
    ) p LIMIT $2
), claimed AS (
    UPDATE corotask.tasks t SET
        heartbeat = now(),
        claim = gen_random_uuid(),
        inbox = t.inbox || t.inbox_next,
        inbox_next = '{}'
    FROM picked
    WHERE t.task_id = picked.task_id
    RETURNING t.task_id, t.task_type, t.parent_id, t.inner_state, t.inbox, t.claim, t.failures
)
SELECT task_id, task_type, parent_id, inner_state, inbox, claim, failures, NULL::timestamptz FROM claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, (
    SELECT wake_at FROM corotask.tasks
    WHERE heartbeat = '0001-01-01 00:00:00+00' AND done_at IS NULL AND wake_at IS NOT NULL
      AND wake_at > now() AND task_type = ANY($6::text[])
    ORDER BY wake_at
    LIMIT 1)`

// claim claims what req allows, and returns the claimed tasks and the
// earliest future wake_at (zero if none is known).
func (e *Executor) claim(ctx context.Context, req claimRequest) ([]*claimed, time.Time, error) {
	at := time.Now()
	rows, err := e.pool.Query(ctx, claimSQL[req.stale], req.open, req.total, req.capped, req.caps,
		e.cfg.HeartbeatTimeout.Seconds(), req.all)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: %w", tasks.TranslateError(err))
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
			return nil, time.Time{}, fmt.Errorf("claim: %w", err)
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
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: %w", tasks.TranslateError(err))
	}
	return out, next, nil
}
