package executor

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// onlyControlled is req with only the types known to have flow controls.
func (cl *claimer) onlyControlled(req claimRequest) claimRequest {
	if !cl.controlled.any() || req.total == 0 {
		return claimRequest{}
	}
	return req.only(func(typ string) bool { return cl.controlled.has(tasks.Type(typ)) })
}

// typeControls are a type's flow controls as a claim on Citus counts them.
type typeControls struct {
	paused   bool
	max      int     // 0: none
	space    *string // its key space, if any ...
	keyMax   int     // ... and the space's limit per key
	rate     *string // its rate limit, if any ...
	tokens   float64 // ... the tokens it holds ...
	perToken float64 // ... and the seconds it takes to refill one
	counting int     // the running polls counted toward max, over every shard
}

// claimControlled claims the types of req, which have flow controls, on a
// distributed database, on conn, which holds the controls lock shared (see
// claimShards): it takes the controlled claims' lock (so that such claims
// take turns across the fleet), counts each type's running polls over
// every shard and reads its rate limit's tokens, caps each type within
// them (and within req), counts the running tasks per limit key of the
// key spaces of its types over every shard, and claims shard by shard by
// query.ClaimShardCounted, the types of each rate limit together (their
// claims share its tokens: reserved before, those not used given back
// after). A type that may take nothing (paused, at its maximum, or without
// a free slot) is left out of the claim.
func (cl *claimer) claimControlled(ctx context.Context, conn *pgxpool.Conn, sc shardClaim, req claimRequest, at time.Time) ([]*claimed, time.Time, error) {
	if _, err := conn.Exec(ctx, query.CitusControlledLock); err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: wait for the other controlled claims: %w", dberr.Translate(err))
	}
	controls, now, err := readTypeControls(ctx, conn, req.all)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: read the flow controls: %w", dberr.Translate(err))
	}
	groups, counted := capControlled(req, controls)
	sc.counted = counted
	if sc.keys, err = countKeys(ctx, conn, controls); err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: count the running tasks per limit key: %w", dberr.Translate(err))
	}
	var out []*claimed
	var next time.Time
	claims := 0
	for _, g := range groups {
		g.req.total = min(g.req.total, req.total-len(out))
		if g.rate != "" && g.req.total > 0 {
			// The tokens are reserved first: an executor that dies before
			// it gives back those it did not use leaves the limit under its
			// rate, never over it.
			var took int
			if err := conn.QueryRow(ctx, query.CitusReserveTokens, g.rate, g.req.total, now).Scan(&took); err != nil {
				err = fmt.Errorf("claim: take the tokens of rate limit %q: %w", g.rate, dberr.Translate(err))
				if len(out) == 0 {
					return nil, time.Time{}, err
				}
				cl.log.Warn("corotask: claim of the types with flow controls", "error", err)
				break
			}
			g.req.total = took
		}
		if g.req.total == 0 {
			next = earliest(next, g.nextToken(0, now))
			continue
		}
		claims++
		got, gnext, err := cl.claimOverShards(ctx, sc, g.req, at)
		next = earliest(next, g.nextToken(len(got), now))
		if unused := g.req.total - len(got); g.rate != "" && unused > 0 {
			backCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cl.cfg.HeartbeatTimeout)
			if _, err := conn.Exec(backCtx, query.CitusReturnTokens, g.rate, unused, now); err != nil {
				cl.log.Warn("corotask: give back the unused tokens of a rate limit", "limit", g.rate, "tokens", unused, "error", err)
			}
			cancel()
		}
		out = append(out, got...)
		next = earliest(next, gnext)
		if err != nil {
			if len(out) == 0 {
				return nil, time.Time{}, err
			}
			cl.log.Warn("corotask: claim of the types with flow controls", "error", err)
			break
		}
	}
	if claims == 0 {
		cl.hooks.claimDone(ctx, at, &req, 0, nil) // the controls hold every type back
	}
	return out, next, nil
}

// earliest is the earlier of a and b, a zero time meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// readTypeControls reads, under the controls lock, the controls of types,
// and counts the running polls of those with a maximum; and the database's
// time of the read (corotask.now()), by which the rate limits' buckets
// refill.
func readTypeControls(ctx context.Context, conn *pgxpool.Conn, types []string) (map[string]*typeControls, time.Time, error) {
	rows, err := conn.Query(ctx, query.CitusControls, types)
	if err != nil {
		return nil, time.Time{}, err
	}
	controls := map[string]*typeControls{}
	var typ string
	var c typeControls
	var now time.Time
	if _, err := pgx.ForEachRow(rows, []any{&typ, &c.paused, &c.max, &c.space, &c.keyMax, &c.rate, &c.tokens, &c.perToken, &now}, func() error {
		cc := c
		controls[typ] = &cc
		return nil
	}); err != nil {
		return nil, time.Time{}, err
	}
	var maxed []string
	for typ, c := range controls {
		if c.max > 0 {
			maxed = append(maxed, typ)
		}
	}
	if len(maxed) == 0 {
		return controls, now, nil
	}
	rows, err = conn.Query(ctx, query.CitusCountedRunning, maxed)
	if err != nil {
		return nil, time.Time{}, err
	}
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&typ, &n}, func() error {
		controls[typ].counting = n
		return nil
	}); err != nil {
		return nil, time.Time{}, err
	}
	return controls, now, nil
}

// controlledGroup is a claim of types with flow controls: those of one
// rate limit (rate), whose claims together take at most its tokens, or
// those without one (rate "").
type controlledGroup struct {
	req  claimRequest
	rate string
	// The tokens of its rate limit when the claim read them, and the
	// seconds it takes to refill one.
	tokens, perToken float64
}

// nextToken is when the rate limit of g has a whole token again after the
// claim took used of them: the time to claim its types again, as the claim
// statement on one server says (claimNextToken); zero when one is left, or
// without a rate limit.
func (g controlledGroup) nextToken(used int, now time.Time) time.Time {
	left := g.tokens - float64(used)
	if g.rate == "" || left >= 1 {
		return time.Time{}
	}
	return now.Add(time.Duration((1 - left) * g.perToken * float64(time.Second)))
}

// keyCounts are, for a claim of types with controls on Citus, the key
// spaces of its types and the running tasks of each key of them over every
// shard: the claim on a shard counts with them (query.ClaimCounted), and
// the executor adds the keys of what each shard's claim took before it
// claims on the next. A nil *keyCounts is a claim without key spaces.
type keyCounts struct {
	// The claim's types that have a key space, their spaces, and the
	// spaces' limits per key.
	types, spaces []string
	max           []int32
	running       map[spaceKey]int32
}

// spaceKey is a limit key in its key space.
type spaceKey struct{ space, key string }

// countKeys counts the running tasks per limit key of the key spaces of
// controls over every shard; nil when no type of controls has a key space.
func countKeys(ctx context.Context, conn *pgxpool.Conn, controls map[string]*typeControls) (*keyCounts, error) {
	k := &keyCounts{running: map[spaceKey]int32{}}
	for typ, c := range controls {
		if c.space != nil {
			k.types, k.spaces, k.max = append(k.types, typ), append(k.spaces, *c.space), append(k.max, int32(c.keyMax))
		}
	}
	if len(k.types) == 0 {
		return nil, nil
	}
	rows, err := conn.Query(ctx, query.CitusKeysRunning, k.spaces)
	if err != nil {
		return nil, err
	}
	var sk spaceKey
	var n int32
	if _, err := pgx.ForEachRow(rows, []any{&sk.space, &sk.key, &n}, func() error {
		k.running[sk] = n
		return nil
	}); err != nil {
		return nil, err
	}
	return k, nil
}

// spaceOf is the key space of typ, one of the claim's types; false when it
// has none.
func (k *keyCounts) spaceOf(typ string) (string, bool) {
	if i := slices.Index(k.types, typ); i >= 0 {
		return k.spaces[i], true
	}
	return "", false
}

// atLimit names, as query.CitusKeyAtLimit does, each of the claim's types
// with a key space and each key of the space at its limit; empty for nil.
func (k *keyCounts) atLimit() []string {
	out := []string{}
	if k == nil {
		return out
	}
	for i, typ := range k.types {
		for sk, n := range k.running {
			if sk.space == k.spaces[i] && n >= k.max[i] {
				out = append(out, query.CitusKeyAtLimit(typ, sk.key))
			}
		}
	}
	return out
}

// args are the parameters of query.ClaimShardCounted after its counted
// types: the types with a key space, their spaces and limits per key, and
// the running tasks per key.
func (k *keyCounts) args() []any {
	if k == nil {
		return []any{[]string{}, []string{}, []int32{}, []string{}, []string{}, []int32{}}
	}
	spaces, keys, counts := make([]string, 0, len(k.running)), make([]string, 0, len(k.running)), make([]int32, 0, len(k.running))
	for sk, n := range k.running {
		spaces, keys, counts = append(spaces, sk.space), append(keys, sk.key), append(counts, n)
	}
	return []any{k.types, k.spaces, k.max, spaces, keys, counts}
}

// add counts the limit keys of the tasks a shard's claim took (got) among
// the running tasks, read on that shard through sender.
func (k *keyCounts) add(ctx context.Context, sender batchSender, got []*claimed) error {
	if k == nil {
		return nil
	}
	var roots, ids []tasks.ID
	for _, c := range got {
		if _, ok := k.spaceOf(string(c.typ)); ok {
			roots, ids = append(roots, c.root), append(ids, c.id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	b.Queue(query.CitusClaimedKeys, roots, ids)
	br := sender.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return err
	}
	var typ, key string
	_, err = pgx.ForEachRow(rows, []any{&typ, &key}, func() error {
		space, _ := k.spaceOf(typ)
		k.running[spaceKey{space, key}]++
		return nil
	})
	return err
}

// capControlled splits req by rate limit, each type capped within its
// controls (a type no longer controlled keeps req's cap) and each group's
// total within its rate limit's tokens, and returns the groups (those
// without a rate limit first) and the types whose claims count toward a
// maximum. A type that may take nothing is left out: in a claim, its ready
// tasks would take the places of the others' in the read of which shards
// hold work (and a type left out of a claim's types is not searched for
// expired claims either).
func capControlled(req claimRequest, controls map[string]*typeControls) ([]controlledGroup, []string) {
	var groups []controlledGroup
	group := map[string]int{} // rate limit: its place in groups
	tokens, perToken := map[string]float64{}, map[string]float64{}
	counted := []string{}
	add := func(rate, typ string, window int32, limit int) {
		i, ok := group[rate]
		if !ok {
			i = len(groups)
			group[rate] = i
			g := req
			g.open, g.capped, g.caps, g.all, g.window, g.total = nil, nil, nil, nil, nil, 0
			groups = append(groups, controlledGroup{req: g, rate: rate})
		}
		g := &groups[i].req
		g.capped, g.caps = append(g.capped, typ), append(g.caps, int32(limit))
		g.all, g.window = append(g.all, typ), append(g.window, window)
		g.total += limit
	}
	for k, typ := range req.all {
		limit := req.total
		if i := slices.Index(req.capped, typ); i >= 0 {
			limit = int(req.caps[i])
		} else if !slices.Contains(req.open, typ) {
			limit = 0 // capped at 0, not left uncapped in the search of expired claims
		}
		rate := ""
		if c := controls[typ]; c != nil {
			if c.paused {
				limit = 0
			}
			if c.max > 0 {
				limit = min(limit, c.max-c.counting)
				counted = append(counted, typ)
			}
			if c.rate != nil {
				rate = *c.rate
				tokens[rate] = c.tokens
				perToken[rate] = c.perToken
			}
		}
		if limit > 0 {
			add(rate, typ, req.window[k], limit)
		}
	}
	for i := range groups {
		g := &groups[i]
		if g.rate != "" {
			g.tokens, g.perToken = tokens[g.rate], perToken[g.rate]
			g.req.total = min(g.req.total, max(int(math.Floor(g.tokens)), 0))
		}
	}
	// Without a rate limit first: they take no tokens.
	slices.SortStableFunc(groups, func(a, b controlledGroup) int {
		switch {
		case a.rate == "" && b.rate != "":
			return -1
		case a.rate != "" && b.rate == "":
			return 1
		}
		return 0
	})
	return groups, counted
}
