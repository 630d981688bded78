package executor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/corotask/corotask/tasks"
)

// polls runs the polls: one goroutine per poll, from its start to its
// settling. wg counts every such goroutine, and those the polls and the
// committers start in the background (give-backs), so that Run, which
// waits for wg as it stops, adds to it only from a goroutine it counts. It
// owns no counter: the slots say when a poll may start.
type polls struct {
	*env
	slots  *slots
	beats  *heartbeats
	commit *committer
	wg     sync.WaitGroup
}

// start runs the poll of c, claimed by the claim loop, in its own goroutine,
// or has it wait for a slot (see slots.take). It refuses (false) a task
// this executor is still polling: that poll's claim is superseded, so it is
// canceled, and the new claim is the caller's to give back rather than
// polled twice at once.
func (p *polls) start(c *claimed) bool {
	f, old, run := p.slots.take(c)
	if old != nil {
		p.log.Warn("corotask: took back a task whose heartbeat went stale while polled here", "task", c.id)
		old.cancel(ErrClaimLost)
		return false
	}
	if run {
		p.launch(f)
	}
	return true
}

// launch has f's claim renewed and runs its poll in a goroutine of its own.
func (p *polls) launch(f *flight) {
	p.beats.add(f.c, f.c.claimedAt, f.cancel)
	p.wg.Add(1)
	go p.run(f)
}

// run polls f's task and settles the outcome, in the poll's own goroutine.
// There is one such goroutine per poll in flight, and the frames of run and
// of the handler sit under the poller's own for as long as it waits. They
// are kept small (what comes before and after the poll is in functions of
// its own, which return before the poll or are called after it) so that a
// poller that waits on a channel or a timer fits in the 2 KB stack a
// goroutine starts with: a stack that grew is never shrunk back while the
// poll waits, and 10,000 polls in flight would hold twice the memory.
func (p *polls) run(f *flight) {
	// Deferred, so that a poller that ends its goroutine (runtime.Goexit,
	// as t.FailNow does in a test) still frees its slot and stops renewing
	// its claim, which then expires and is taken over.
	defer p.forget(f)
	p.beginPoll(f)
	p.endPoll(f, f.h.poll(f.pollCtx, f.c))
}

// beginPoll sets the poll's context to the one the hooks return, and
// starts its type's PollTimeout, if any.
//
//go:noinline
func (p *polls) beginPoll(f *flight) {
	f.ctx = p.hooks.pollStart(f.ctx, f.c)
	f.pollCtx, f.deadline = withPollTimeout(f.ctx, f.h.options().pollTimeout, f.c.typ)
}

// endPoll settles the outcome of f's poll. The poll's slot is freed first,
// so that the claim loop can take more work while its outcome commits:
// commits are batched, and a slot held until the commit would leave the
// executor idle while every batch waits on its WAL flush.
//
//go:noinline
func (p *polls) endPoll(f *flight, out *outcome) {
	out = f.deadline.returned(out)
	p.hooks.pollReturned(f.c, out)
	p.startWaiting(p.slots.polled(f.c))
	p.signal()
	p.commit.settle(f.ctx, f.c, out, f.h.options())
	p.hooks.pollDone(f.ctx, f.c)
}

// forget forgets f's poll once it has settled (or its goroutine ended):
// its claim is no longer renewed, its context is canceled, and the claim
// loop may fill its slot.
func (p *polls) forget(f *flight) {
	p.beats.remove(f.c)
	p.startWaiting(p.slots.done(f.c))
	f.deadline.stop()
	f.cancel(nil)
	p.signal()
	p.wg.Done()
}

// startWaiting starts the polls slots.takeWaiting took, and forgets the
// others. It is called where a slot frees, from a goroutine counted in wg
// (a poll's, or a committer's while the batch's polls wait for it), so that
// adding to wg is safe while Run waits for the polls.
func (p *polls) startWaiting(run, gone []*flight) {
	var back []*claimed
	for _, f := range gone {
		cause := context.Cause(f.ctx)
		if errors.Is(cause, ErrCanceled) {
			p.canceled.add(f.c.id)
		} else {
			p.log.Info("corotask: a claimed task that waited for a slot was lost meanwhile", "task", f.c.id,
				"type", f.c.typ, "cause", cause)
		}
		p.beats.remove(f.c)
		if errors.Is(cause, ErrRenewTimeout) {
			// Perhaps still ours: given back (fenced) rather than left to
			// expire and be taken over, a failure counted.
			back = append(back, f.c)
		}
	}
	if len(back) > 0 {
		p.background(func() { p.commit.giveBack(back, 0) })
	}
	for _, f := range run {
		p.wg.Add(1)
		go p.run(f)
	}
}

// background runs f in a goroutine Run waits for. It is called from a
// goroutine counted in wg (see startWaiting).
func (p *polls) background(f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

// stop lets no poll start any more, and gives back the claims of the tasks
// still waiting for a slot.
func (p *polls) stop() {
	fs := p.slots.stop()
	if len(fs) == 0 {
		return
	}
	cs := make([]*claimed, len(fs))
	for i, f := range fs {
		p.beats.remove(f.c)
		f.cancel(ErrShutdown)
		cs[i] = f.c
	}
	p.commit.giveBack(cs, 0)
}

// drain waits for the polls for up to timeout, then cancels those left
// (with cause ErrShutdown) and waits as long again; pollers that ignore
// their context then have their claims given back anyway: whatever they
// commit later is refused by the fence.
func (p *polls) drain(timeout time.Duration) {
	if waitTimeout(&p.wg, timeout) {
		return
	}
	for _, f := range p.slots.flights() {
		f.cancel(ErrShutdown)
	}
	if waitTimeout(&p.wg, timeout) {
		return
	}
	fs := p.slots.flights()
	cs := make([]*claimed, len(fs))
	for i, f := range fs {
		cs[i] = f.c
	}
	p.commit.giveBack(cs, 0)
}

// cancelTask cancels the poll of a task canceled in the database.
func (p *polls) cancelTask(id tasks.ID) {
	if f, ok := p.slots.find(id); ok {
		// Logged with the others the cancel stopped, once the poll settles.
		p.log.Debug("corotask: task canceled while polled", "task", id)
		f.cancel(ErrCanceled)
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
