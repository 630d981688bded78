package executor

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/corotask/corotask/internal/dberr"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// Eager children: a child spawned by a poll of this executor, of a type it
// polls, is created already claimed by it, in the commit that creates it,
// when a slot is free (see Config.DisableEagerChildren). The executor then
// polls it at once: no claim statement (an index search and an update of
// the child's row), no wait for the next claim.
//
// The slots are reserved before the batch is sent, with the claim tokens
// the commit writes; once the batch has committed, the children of the polls
// it kept start in those slots. A batch that fails, or a poll it does not
// keep (its claim lost, or superseded), creates no child, and its slots are
// given back. A batch whose reply was lost may have created its children:
// their claims are released (see dropChildren); if that fails too, they
// expire and another claim takes them over, as after a crash between a
// claim and its poll.
//
// A claim in flight counted the free slots before it ran; if a batch took
// some for its children meanwhile, the claimed tasks that no longer fit wait
// for a slot, their claims renewed (see slots.take).

// eagerChild is a child a batch's commit creates claimed by this executor.
type eagerChild struct {
	poll  int // the index in the batch of the poll that spawned it ...
	spawn int // ... and its index among that poll's spawns (its claim token is the poll's childClaims[spawn])
}

// eagerPlan is the children a batch's commit creates claimed, each with a
// slot reserved for it.
type eagerPlan struct {
	children []eagerChild
	at       time.Time // just before the commit is sent: the claims' age counts from it
}

// reserveChildren picks the children of batch to create claimed, reserves
// a slot for each (see slots.reserve), and marks their spawns with claim
// tokens (see commitArgs). It returns nil when there are none.
func (cm *committer) reserveChildren(batch []*pendingCommit) *eagerPlan {
	if cm.cfg.DisableEagerChildren || !spawnsAny(batch) {
		return nil
	}
	var plan *eagerPlan
	cm.slots.reserve(len(batch), func(take func(tasks.Type) bool) {
		for i, p := range batch {
			var sentTo map[tasks.ID]bool // the poll's recipients, once needed
			for j, s := range p.out.spawns {
				// A child with a message has its envelope stamped by the
				// database: it is claimed as usual, and polled as stored.
				if m, _ := s.Message.([]byte); len(m) > 0 {
					continue
				}
				// A child the poll also sends a message to would find it in
				// inbox_next, not inbox, on its first poll (it is running when
				// the message is delivered): it is claimed as usual.
				if sentTo == nil && len(p.out.sends) > 0 {
					sentTo = recipients(p.out)
				}
				// A type with flow controls is claimed only by a claim,
				// which counts against them.
				if sentTo[s.ID] || cm.controlled.has(s.Type) || !take(s.Type) {
					continue
				}
				if plan == nil {
					plan = &eagerPlan{}
				}
				if p.childClaims == nil {
					p.childClaims = make([][16]byte, len(p.out.spawns))
				}
				_, _ = rand.Read(p.childClaims[j][:])
				plan.children = append(plan.children, eagerChild{poll: i, spawn: j})
			}
		}
	})
	return plan
}

// recipients returns the tasks out sends messages to.
func recipients(out *outcome) map[tasks.ID]bool {
	to := make(map[tasks.ID]bool, len(out.sends))
	for _, m := range out.sends {
		to[m.to] = true
	}
	return to
}

func spawnsAny(batch []*pendingCommit) bool {
	for _, p := range batch {
		if len(p.out.spawns) > 0 {
			return true
		}
	}
	return false
}

// startChildren starts the polls of plan's children whose spawning poll the
// batch kept (as), and gives back the slots of the others. It returns how
// many children the batch created claimed (all given back when the executor
// is stopping).
func (cm *committer) startChildren(batch []*pendingCommit, plan *eagerPlan, as map[tasks.ID]committedAs) int {
	var cs []*claimed
	traces := map[int][]byte{}
	for _, k := range plan.children {
		p := batch[k.poll]
		s := p.out.spawns[k.spawn]
		if as[p.c.id] != committed || as[s.ID] == createdReady {
			continue
		}
		st, _ := s.State.([]byte)
		tr, ok := traces[k.poll]
		if !ok && len(p.out.trace) > 0 {
			tr, _ = json.Marshal(p.out.trace)
			traces[k.poll] = tr
		}
		woke := WokeFirst // as commit_polls records it
		if s.Message != nil {
			woke |= WokeMessage
		}
		cs = append(cs, &claimed{id: s.ID, typ: s.Type, parent: p.c.id, root: p.c.root, state: st, claim: p.childClaims[k.spawn],
			attempt: 1, claimedAt: plan.at, trace: tr, key: s.Key, woke: woke, now: eagerNow(p.c, plan.at)})
	}
	types := make([]tasks.Type, len(plan.children))
	for i, k := range plan.children {
		types[i] = batch[k.poll].out.spawns[k.spawn].Type
	}
	// The slots of children not created go to tasks waiting for one.
	fs, stopping, run, gone := cm.slots.unreserve(types, cs)
	if stopping && len(cs) > 0 {
		cm.giveBack(cs, 0)
	}
	// Run may be waiting for the polls by now: adding to polls.wg is still
	// safe, as the spawning polls are counted there until this batch tells
	// them it has committed.
	for _, f := range fs {
		cm.polls.launch(f)
	}
	cm.polls.startWaiting(run, gone)
	if len(fs) < len(plan.children) {
		cm.signal() // slots given back
	}
	return len(cs)
}

// dropChildren gives back the slots of a plan whose batch failed with err.
// When the server refused the batch, none of its children was created. When
// the batch's fate is unknown (the connection broke, or the reply did not
// come in time), it may have committed, or may still commit, and created
// the children claimed by this executor, which will not poll them: their
// claims are released (see releaseChildren), so that they are ready at once
// rather than taken over, a failure counted, when their claims expire.
func (cm *committer) dropChildren(batch []*pendingCommit, plan *eagerPlan, err error) {
	cm.startChildren(batch, plan, nil)
	var pgErr *pgconn.PgError
	if pgconn.SafeToRetry(err) || errors.As(err, &pgErr) && pgErr.Severity == "ERROR" {
		return // not sent, or refused by the server
	}
	cs := make([]*claimed, 0, len(plan.children))
	var parents []tasks.ID
	for _, k := range plan.children {
		p := batch[k.poll]
		s := p.out.spawns[k.spawn]
		cs = append(cs, &claimed{id: s.ID, typ: s.Type, parent: p.c.id, root: p.c.root, claim: p.childClaims[k.spawn]})
		if !slices.Contains(parents, p.c.id) {
			parents = append(parents, p.c.id)
		}
	}
	// In the background, as the server may be unreachable.
	cm.polls.background(func() {
		if err := cm.releaseChildren(parents, cs); err != nil {
			cm.log.Warn("corotask: could not release the children of a commit that may have created them; they are taken over when their claims expire",
				"children", len(cs), "error", err)
		}
	})
}

// releaseChildren releases the claims of children a batch of unknown fate
// may have created. It first locks their parents, which a batch holds from
// its update of them to its end: a batch still running on the server (its
// client gone) is waited for, and the release then sees its children. (One
// that has not reached its parents yet commits after the release, and its
// children are taken over when their claims expire.)
func (cm *committer) releaseChildren(parents []tasks.ID, cs []*claimed) error {
	ctx, cancel := context.WithTimeout(context.Background(), cm.cfg.HeartbeatTimeout)
	defer cancel()
	ids, tokens := claimArgs(cs)
	var n int
	err := pgx.BeginFunc(ctx, cm.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, query.ReleaseLockParents, parents); err != nil {
			return err
		}
		return tx.QueryRow(ctx, query.ReleaseChildren, ids, tokens).Scan(&n)
	})
	if err != nil {
		return fmt.Errorf("release %d children: %w", len(cs), dberr.Translate(err))
	}
	cm.log.Info("corotask: released the children of a commit whose reply was lost", "children", n)
	return nil
}

// eagerNow is the database's time when a child of parent, created claimed
// by a commit sent at at, is polled: the parent's claim's time, plus what
// passed here since. Zero when the parent's is not known.
func eagerNow(parent *claimed, at time.Time) time.Time {
	if parent.now.IsZero() || parent.claimedAt.IsZero() {
		return parent.now
	}
	return parent.now.Add(max(at.Sub(parent.claimedAt), 0))
}
