package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// maxBatch is the most polls one commit statement carries.
const maxBatch = 500

// committers is how many batches may be committing at once. While they
// commit, the next polls to finish queue up and form the next batches: the
// busier the executor, the larger its batches and the fewer its transactions.
// They take turns (see committer.turn): more than one commits at once only while
// a commit is slow.
const committers = 3

// slowCommit is how long a commit may run before the next batch, which
// waits for its turn meanwhile, goes ahead beside it. Commits one at a time
// make larger batches, and fewer transactions that contend for the same rows
// and the server's CPU: on the benchmark machine, about 1.3x the throughput
// of three at once. A commit that waits for a row lock (an operator's open
// transaction, a statement_timeout) must not hold up every other poll.
const slowCommit = 50 * time.Millisecond

// committedAs is what became of a poll's outcome at its commit.
type committedAs uint8

const (
	fenced     committedAs = iota // the claim was lost: nothing written
	committed                     // written
	superseded                    // done, but messages arrived meanwhile: dropped, the task polled again
	// createdReady is an eager child that the commit created ready, not
	// claimed: its type has flow controls (see controlledTypes).
	createdReady
)

// committer writes what became of the polls: it batches their outcomes
// (queue, loop: committers goroutines, a service of Run's), commits on its
// own what a batch cannot carry (commitTx), records failures and lost
// claims, gives claims back, and starts the eager children a batch created
// (see eager.go). It owns the queue, the turn of the batches and the
// committing context; the slots it asks for the children's places.
type committer struct {
	*env
	slots *slots
	polls *polls
	// q feeds the batch committers; committing is canceled when they stop,
	// so that polls then commit on their own.
	q          chan *pendingCommit
	mu         sync.Mutex
	committing context.Context
	// turn is held by the batch committing (see slowCommit).
	turn chan struct{}
}

func newCommitter(v *env, s *slots, p *polls) *committer {
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	return &committer{env: v, slots: s, polls: p, q: make(chan *pendingCommit),
		turn: make(chan struct{}, 1), committing: stopped}
}

// pendingCommit is a poll outcome waiting for the batch committer.
type pendingCommit struct {
	c       *claimed
	out     *outcome
	history int16      // see typeOptions.history
	done    chan error // nil: committed or refused by the fence; else the batch failed
	// childClaims, when set, holds a claim token for each of out.spawns to
	// create claimed by this executor (zero: created ready); see eager.go.
	childClaims [][16]byte
}

// open lets polls queue their outcomes while ctx lasts: the loops (see
// run) that ctx stops commit them.
func (cm *committer) open(ctx context.Context) {
	cm.mu.Lock()
	cm.committing = ctx
	cm.mu.Unlock()
}

// queue hands a poll's outcome to the batch committers and waits for
// the batch. queued is false when no committer runs (PollOnce, or Run
// stopping).
func (cm *committer) queue(ctx context.Context, c *claimed, out *outcome, history int16) (err error, queued bool) {
	p := &pendingCommit{c: c, out: out, history: history, done: make(chan error, 1)}
	cm.mu.Lock()
	committing := cm.committing
	cm.mu.Unlock()
	select {
	case cm.q <- p:
	case <-committing.Done():
		return nil, false
	}
	select {
	case err := <-p.done:
		return err, true
	case <-ctx.Done():
		return ctx.Err(), true
	}
}

// run commits queued polls in batches until ctx ends.
func (cm *committer) run(ctx context.Context) {
	for {
		var first *pendingCommit
		select {
		case <-ctx.Done():
			return
		case first = <-cm.q:
		}
		// The polls that finish until this batch's turn join it.
		held, ok := cm.awaitCommitTurn(ctx)
		if !ok {
			first.done <- ctx.Err()
			return
		}
		batch := []*pendingCommit{first}
	fill:
		for len(batch) < maxBatch {
			select {
			case p := <-cm.q:
				batch = append(batch, p)
			default:
				break fill
			}
		}
		cm.commitBatch(ctx, batch)
		if held {
			<-cm.turn
		}
	}
}

// awaitCommitTurn waits until no other batch commits, or for slowCommit,
// whichever comes first; held says whether it took the turn, which the
// caller gives back once its batch has committed. ok is false when ctx ended.
func (cm *committer) awaitCommitTurn(ctx context.Context) (held, ok bool) {
	select {
	case cm.turn <- struct{}{}:
		return true, true
	default:
	}
	t := time.NewTimer(slowCommit)
	defer t.Stop()
	select {
	case cm.turn <- struct{}{}:
		return true, true
	case <-t.C:
		return false, true
	case <-ctx.Done():
		return false, false
	}
}

// commitBatch commits a batch in one statement and tells each poll how it went.
func (cm *committer) commitBatch(ctx context.Context, batch []*pendingCommit) {
	slices.SortFunc(batch, func(a, b *pendingCommit) int { return bytes.Compare(a.c.id[:], b.c.id[:]) })
	plan := cm.reserveChildren(batch)
	start := cm.hooks.now()
	if plan != nil {
		plan.at = time.Now()
	}
	as, err := cm.runBatch(ctx, batch)
	for tries := 1; plan == nil && cm.atOnce(err, tries); tries++ {
		// The connection was severed: the batch is tried again at once on
		// another, rather than each poll committing on its own. (A batch
		// that committed before the reply was lost is fenced the second
		// time.) One that creates claimed children is left to dropChildren,
		// which knows what to do with children of unknown fate.
		as, err = cm.runBatch(ctx, batch)
	}
	children := 0
	switch {
	case plan == nil:
	case err == nil:
		children = cm.startChildren(batch, plan, as)
	default:
		cm.dropChildren(batch, plan, err)
	}
	cm.hooks.commitDone(ctx, start, len(batch), children, &err)
	for _, p := range batch {
		p.done <- err
	}
}

// runBatch commits batch in one statement, and says what became of each poll.
func (cm *committer) runBatch(ctx context.Context, batch []*pendingCommit) (map[tasks.ID]committedAs, error) {
	args, err := cm.commitArgs(batch)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cm.cfg.HeartbeatTimeout)
	defer cancel()
	rows, err := cm.pool.Query(ctx, query.CommitPolls, args)
	if err != nil {
		return nil, fmt.Errorf("commit %d polls: %w", len(batch), dberr.Translate(err))
	}
	as := make(map[tasks.ID]committedAs, len(batch))
	ready := false // a child created ready (see createdReady)
	for rows.Next() {
		var id tasks.ID
		var dropped *bool
		if err := rows.Scan(&id, &dropped); err != nil {
			rows.Close()
			return nil, fmt.Errorf("commit %d polls: %w", len(batch), err)
		}
		switch {
		case dropped == nil:
			as[id], ready = createdReady, true
		case *dropped:
			as[id] = superseded
		default:
			as[id] = committed
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("commit %d polls: %w", len(batch), dberr.Translate(err))
	}
	for _, p := range batch {
		cm.logCommitted(ctx, p.c, p.out, as[p.c.id], p.history)
	}
	if ready {
		cm.signal() // a claim may take them
	}
	return as, nil
}

type spawnJSON struct {
	ID    string            `json:"id"`
	Type  tasks.Type        `json:"type"`
	State json.RawMessage   `json:"state,omitempty"`
	Msg   json.RawMessage   `json:"msg,omitempty"`
	Trace map[string]string `json:"trace,omitempty"`
	Claim string            `json:"claim,omitempty"` // see eager.go
	Key   string            `json:"key,omitempty"`
	// Priority and LimitKey: see tasks.Spec.
	Priority int    `json:"priority,omitempty"`
	LimitKey string `json:"limit_key,omitempty"`
}

type sendJSON struct {
	To    string            `json:"to"`
	Msg   json.RawMessage   `json:"msg"`
	Trace map[string]string `json:"trace,omitempty"`
}

type effectsJSON struct {
	Spawn []spawnJSON `json:"spawn,omitempty"`
	Send  []sendJSON  `json:"send,omitempty"`
}

// commitRow is one poll's entries in the arrays commit_polls takes (see
// query.CommitPolls), named as its parameters are.
type commitRow struct {
	task    tasks.ID
	claim   pgtype.UUID
	state   []byte
	taken   int32
	popFrom *int64
	popTo   *int64
	action  string
	sleep   float64
	at      *time.Time
	result  []byte
	effects []byte
	history int16
	// The parent, as claimed: the commit locks those it tells of an end
	// without looking them up.
	parent pgtype.UUID
	// The root of the task's tree (NULL: not known): on Citus the commit
	// locks the rows of the task and of its parent, which shares it,
	// without reading every shard to find them.
	root pgtype.UUID
}

// column is one array argument of commit_polls: f of every row.
func column[T any](rows []commitRow, f func(*commitRow) T) []T {
	out := make([]T, len(rows))
	for i := range rows {
		out[i] = f(&rows[i])
	}
	return out
}

// commitArgs builds the arguments of query.CommitPolls for a batch of polls.
func (cm *committer) commitArgs(batch []*pendingCommit) (pgx.NamedArgs, error) {
	rows := make([]commitRow, len(batch))
	// The executor that claims the children with a claim token.
	var claimedBy pgtype.UUID
	for i, p := range batch {
		c, out := p.c, p.out
		r := &rows[i]
		r.task, r.claim, r.history = c.id, pgtype.UUID{Bytes: c.claim, Valid: true}, p.history
		r.parent = pgtype.UUID{Bytes: c.parent, Valid: !c.parent.IsZero()}
		r.root = pgtype.UUID{Bytes: c.root, Valid: !c.root.IsZero()}
		r.state, r.taken, r.action = out.state, int32(out.taken), out.action.sqlName()
		if out.taken > 0 {
			r.popFrom, r.popTo = &out.popFrom, &out.popTo
		}
		r.sleep, r.result = out.action.sleep.Seconds(), out.result
		if out.action.kind == actUntil {
			r.at = &out.action.at
		}
		if len(out.spawns) == 0 && len(out.sends) == 0 {
			continue
		}
		var eff effectsJSON
		for j, s := range out.spawns {
			st, _ := s.State.([]byte)
			m, _ := s.Message.([]byte)
			sp := spawnJSON{ID: s.ID.UUID(), Type: s.Type, State: st, Msg: m, Trace: out.trace, Key: s.Key,
				Priority: s.Priority, LimitKey: s.LimitKey}
			if p.childClaims != nil && p.childClaims[j] != ([16]byte{}) {
				sp.Claim = tasks.ID(p.childClaims[j]).UUID()
				claimedBy = pgtype.UUID{Bytes: cm.id, Valid: true}
			}
			eff.Spawn = append(eff.Spawn, sp)
		}
		for _, s := range out.sends {
			eff.Send = append(eff.Send, sendJSON{To: s.to.UUID(), Msg: s.body, Trace: out.trace})
		}
		b, err := json.Marshal(eff)
		if err != nil {
			return nil, fmt.Errorf("task %s: encode effects: %w", c.id, err)
		}
		r.effects = b
	}
	return pgx.NamedArgs{
		"tasks":      column(rows, func(r *commitRow) tasks.ID { return r.task }),
		"claims":     column(rows, func(r *commitRow) pgtype.UUID { return r.claim }),
		"states":     column(rows, func(r *commitRow) []byte { return r.state }),
		"taken":      column(rows, func(r *commitRow) int32 { return r.taken }),
		"actions":    column(rows, func(r *commitRow) string { return r.action }),
		"sleeps":     column(rows, func(r *commitRow) float64 { return r.sleep }),
		"ats":        column(rows, func(r *commitRow) *time.Time { return r.at }),
		"results":    column(rows, func(r *commitRow) []byte { return r.result }),
		"effects":    column(rows, func(r *commitRow) []byte { return r.effects }),
		"history":    column(rows, func(r *commitRow) int16 { return r.history }),
		"keep_first": cm.cfg.HistoryKeepFirst,
		"keep_last":  cm.cfg.HistoryKeepLast,
		"parents":    column(rows, func(r *commitRow) pgtype.UUID { return r.parent }),
		"claimed_by": claimedBy,
		"claim_secs": cm.cfg.HeartbeatTimeout.Seconds(),
		"pop_from":   column(rows, func(r *commitRow) *int64 { return r.popFrom }),
		"pop_to":     column(rows, func(r *commitRow) *int64 { return r.popTo }),
		"roots":      column(rows, func(r *commitRow) pgtype.UUID { return r.root }),
	}, nil
}
