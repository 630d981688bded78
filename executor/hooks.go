package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/corotask/corotask/tasks"
)

// Hooks observes an executor: its claims, polls, commits and heartbeat
// renewals. Set one in Config.Hooks to export metrics and traces (package
// otelcorotask does so with OpenTelemetry) or to log in a structured way.
//
// Implementations must embed NoHooks (or another Hooks), which does nothing
// for every method: methods added to Hooks later then keep their no-op
// default, and implementations keep compiling.
//
// Hooks are called from the executor's goroutines, concurrently: they must
// be safe for concurrent use, and quick, since they run on the paths they
// observe. The values they receive are valid during the call only, but for
// the PollInfo of a poll, valid from its PollStart until its PollDone returns.
type Hooks interface {
	// ClaimDone is called after each claim statement, successful or not.
	ClaimDone(ctx context.Context, info *ClaimInfo)
	// PollStart is called before a claimed task is polled. The context it
	// returns becomes the poll's context (the poller's, and the one PollDone
	// receives): return ctx itself, or a context derived from it, e.g. one
	// that carries a span.
	PollStart(ctx context.Context, info *PollInfo) context.Context
	// PollDone is called once a poll has settled: its outcome committed, its
	// failure recorded, or its claim lost or released. It is called exactly
	// once for each PollStart, with the context PollStart returned.
	PollDone(ctx context.Context, info *PollInfo, result *PollResult)
	// CommitDone is called after each commit statement: a batch of polls
	// committed together, or one poll with OnCommit work in a transaction of
	// its own.
	CommitDone(ctx context.Context, info *CommitInfo)
	// HeartbeatDone is called after each renewal of the claims in flight.
	HeartbeatDone(ctx context.Context, info *HeartbeatInfo)

	mustEmbedNoHooks()
}

// NoHooks implements Hooks doing nothing. Embed it in every Hooks
// implementation, and override the methods of interest.
type NoHooks struct{}

// ClaimDone does nothing.
func (NoHooks) ClaimDone(context.Context, *ClaimInfo) {}

// PollStart returns ctx.
func (NoHooks) PollStart(ctx context.Context, _ *PollInfo) context.Context { return ctx }

// PollDone does nothing.
func (NoHooks) PollDone(context.Context, *PollInfo, *PollResult) {}

// CommitDone does nothing.
func (NoHooks) CommitDone(context.Context, *CommitInfo) {}

// HeartbeatDone does nothing.
func (NoHooks) HeartbeatDone(context.Context, *HeartbeatInfo) {}

func (NoHooks) mustEmbedNoHooks() {}

// ClaimInfo describes one claim statement.
type ClaimInfo struct {
	// Duration is how long the claim took, round trip included.
	Duration time.Duration
	// Requested is how many tasks the claim asked for (the free slots);
	// Claimed how many it got.
	Requested, Claimed int
	// Types are the task types the claim looked for.
	Types []string
	// Stale reports whether the claim also looked for tasks whose heartbeat
	// went stale (their executor died or stalled).
	Stale bool
	// Priority reports a claim of the priority lane (Config.PrioritySlots):
	// of tasks above priority 0 only, into the priority slots.
	Priority bool
	// Err is why the claim failed, or nil.
	Err error
}

// PollInfo describes a claimed task about to be polled.
type PollInfo struct {
	Task   tasks.ID
	Type   tasks.Type
	Parent tasks.ID // zero for a root task
	Key    string   // the task's key (tasks.Spec.Key); "" when it has none
	// Attempt counts this poll among the consecutive polls of the task since
	// its last success: 1, or one more than the failures before it.
	Attempt int
	// InboxLen is how many messages the poll finds in its inbox.
	InboxLen int
	// TakenOver is set when this executor took the task over from an
	// expired claim (its holder crashed, was killed or stalled); that
	// attempt was counted as a failure. (An executor that finds its own
	// poll's claim expired gives the task back instead of polling it: the
	// poll that follows is not a takeover.)
	TakenOver bool
	// Trace is the W3C trace context ("traceparent", "tracestate") of the
	// code that created the task (see tasks.WithTrace), or nil.
	Trace map[string]string
	// MessageTraces are the trace contexts of the messages in the poll's
	// inbox that carry one, in inbox order; nil when none does.
	MessageTraces []map[string]string
}

// PollOutcome is how a poll ended.
type PollOutcome string

// The outcomes of a poll.
const (
	// OutcomeCommitted: the poll returned an action, and its state, action
	// and effects were committed.
	OutcomeCommitted PollOutcome = "committed"
	// OutcomeFailed: the poll returned an error (or its effects were
	// refused by the database, or did not encode), and the failure was
	// recorded: the task is retried after a backoff, or ended (see
	// PollResult.Ended).
	OutcomeFailed PollOutcome = "failed"
	// OutcomePanicked: the poll panicked (PollResult.Err is a *PanicError);
	// recorded as a failure.
	OutcomePanicked PollOutcome = "panicked"
	// OutcomeClaimLost: the executor lost the task's claim during the poll
	// or at its commit, and nothing of the poll was kept. PollResult.Err
	// says how: ErrClaimLost (another executor took the task
	// over after this one's heartbeat went stale), ErrRenewTimeout
	// (the heartbeat could not be renewed in time), or ErrCommitFenced.
	OutcomeClaimLost PollOutcome = "claim_lost"
	// OutcomeCanceled: the task was canceled during the poll.
	OutcomeCanceled PollOutcome = "canceled"
	// OutcomeSuperseded: the poll returned Done or DoneWith, but messages
	// arrived for the task while it ran: nothing of the poll was kept, and
	// the task is polled again at once, with those messages.
	OutcomeSuperseded PollOutcome = "superseded"
	// OutcomeReleased: the executor stopped before the poll finished, and
	// gave the claim back for another executor to poll the task.
	OutcomeReleased PollOutcome = "released"
	// OutcomeAbandoned: the outcome could not be written (the database kept
	// failing); the claim goes stale and the task is polled again.
	OutcomeAbandoned PollOutcome = "abandoned"
)

// ErrCommitFenced is the PollResult.Err of a poll whose commit found its
// claim gone: the task was canceled, or taken over by another executor.
var ErrCommitFenced = errors.New("commit refused: the claim was lost")

// PollResult describes how a poll went.
type PollResult struct {
	Outcome PollOutcome
	// Duration is how long the poll itself ran (decoding the task, the
	// poller's Poll, encoding its outcome): not its commit.
	Duration time.Duration
	// Action is what a poll that returned one asked for: "yield", "sleep",
	// "until", "suspend", "await" or "done"; empty when the poll returned an error.
	Action string
	// Spawned and Sent are how many child tasks the poll created and how
	// many messages it sent: committed only if Outcome is OutcomeCommitted.
	Spawned, Sent int
	// Err is why the poll did not commit: the poll's error, a *PanicError,
	// the database's refusal of its effects, or the cause of a lost claim.
	Err error
	// Ended reports that a failed poll ended its task for good (its type's
	// MaxFailures was reached).
	Ended bool
}

// CommitInfo describes one commit statement.
type CommitInfo struct {
	// Duration is how long the commit took, round trip included.
	Duration time.Duration
	// Polls is how many polls it carried.
	Polls int
	// Children is how many children of those polls it created claimed by
	// this executor, which polls them at once, without a claim (see
	// Config.DisableEagerChildren). ClaimInfo does not count them.
	Children int
	// Err is why the commit failed, or nil. Polls whose claim was lost do
	// not fail the commit: they are reported by PollDone.
	Err error
}

// HeartbeatInfo describes one renewal of the claims in flight.
type HeartbeatInfo struct {
	// Duration is how long the renewal took.
	Duration time.Duration
	// Claims is how many claims it renewed (or tried to).
	Claims int
	// Err is why the renewal failed, or nil.
	Err error
}

// hookCaller calls the Hooks of an executor, if it has any. Each method
// returns at once when there are none, and allocates nothing then.
type hookCaller struct {
	h Hooks
}

// pollRecord is what the hooks learn of one poll, from its start to its
// settling. There is one per poll, only when hooks are set.
type pollRecord struct {
	info    PollInfo
	result  PollResult
	started time.Time
	settled bool // the outcome is known: committed, failed, or lost
}

// now returns the time, or the zero time without hooks.
func (hc hookCaller) now() time.Time {
	if hc.h == nil {
		return time.Time{}
	}
	return time.Now()
}

// claimDone reports a claim that began at start.
func (hc hookCaller) claimDone(ctx context.Context, start time.Time, req *claimRequest, claimed int, err error) {
	if hc.h == nil {
		return
	}
	hc.h.ClaimDone(ctx, &ClaimInfo{Duration: time.Since(start), Requested: req.total, Claimed: claimed,
		Types: req.all, Stale: req.stale, Priority: req.lane, Err: err})
}

// pollStart starts the record of c's poll, and returns the poll's context.
func (hc hookCaller) pollStart(ctx context.Context, c *claimed) context.Context {
	if hc.h == nil {
		return ctx
	}
	c.hooked = &pollRecord{info: PollInfo{Task: c.id, Type: c.typ, Parent: c.parent, Key: c.key, Attempt: c.failures + 1,
		InboxLen: len(c.inbox), TakenOver: c.takenOver}}
	c.hooked.info.Trace, c.hooked.info.MessageTraces = traces(c)
	ctx = hc.h.PollStart(ctx, &c.hooked.info)
	c.hooked.started = time.Now()
	return ctx
}

// pollReturned notes what c's poll returned.
func (hc hookCaller) pollReturned(c *claimed, out *outcome) {
	r := c.hooked
	if r == nil {
		return
	}
	r.result.Duration = time.Since(r.started)
	r.result.Err = out.err
	if out.err == nil {
		r.result.Action = out.action.sqlName()
		r.result.Spawned, r.result.Sent = len(out.spawns), len(out.sends)
	}
}

// committed notes what became of c's outcome at its commit.
func (hc hookCaller) committed(c *claimed, as committedAs) {
	r := c.hooked
	if r == nil {
		return
	}
	r.settled = true
	switch as {
	case committed:
		r.result.Outcome = OutcomeCommitted
	case superseded:
		r.result.Outcome = OutcomeSuperseded
		r.result.Spawned, r.result.Sent = 0, 0
	default:
		r.result.Outcome, r.result.Err = OutcomeClaimLost, ErrCommitFenced
	}
}

// failed notes how the failure of c's poll with pollErr was recorded: err
// is the database's error (nothing recorded), lost that the claim was lost,
// ended that the task ended for good.
func (hc hookCaller) failed(c *claimed, pollErr error, lost, ended bool, err error) {
	r := c.hooked
	if r == nil || err != nil {
		return
	}
	r.settled = true
	r.result.Err = pollErr
	var p *PanicError
	switch {
	case lost:
		r.result.Outcome = OutcomeClaimLost
	case errors.As(pollErr, &p):
		r.result.Outcome, r.result.Ended = OutcomePanicked, ended
	default:
		r.result.Outcome, r.result.Ended = OutcomeFailed, ended
	}
}

// pollDone reports the settled poll of c; pctx is its context, whose cause
// says whether the claim was lost, the task canceled or the executor
// stopping.
func (hc hookCaller) pollDone(pctx context.Context, c *claimed) {
	r := c.hooked
	if r == nil {
		return
	}
	// A claim lost at the commit is told apart by the poll's cause, when
	// the heartbeat or a cancellation got there too.
	if cause := context.Cause(pctx); !r.settled || r.result.Outcome == OutcomeClaimLost && cause != nil {
		switch {
		case errors.Is(cause, ErrCanceled):
			r.result.Outcome, r.result.Err = OutcomeCanceled, cause
		case errors.Is(cause, ErrClaimLost), errors.Is(cause, ErrRenewTimeout):
			r.result.Outcome, r.result.Err = OutcomeClaimLost, cause
		case r.settled:
		case errors.Is(cause, ErrShutdown):
			r.result.Outcome, r.result.Err = OutcomeReleased, cause
		default:
			r.result.Outcome = OutcomeAbandoned
		}
	}
	hc.h.PollDone(pctx, &r.info, &r.result)
}

// commitDone reports a commit of polls that began at start, and failed
// with *err. (A pointer, so that a deferred call sees the final error.)
func (hc hookCaller) commitDone(ctx context.Context, start time.Time, polls, children int, err *error) {
	if hc.h == nil {
		return
	}
	hc.h.CommitDone(ctx, &CommitInfo{Duration: time.Since(start), Polls: polls, Children: children, Err: *err})
}

// heartbeatHook returns the keeper's renewal callback, or nil without hooks.
func (hc hookCaller) heartbeatHook() func(ctx context.Context, claims int, took time.Duration, err error) {
	if hc.h == nil {
		return nil
	}
	return func(ctx context.Context, claims int, took time.Duration, err error) {
		hc.h.HeartbeatDone(ctx, &HeartbeatInfo{Duration: took, Claims: claims, Err: err})
	}
}

// traceKey marks the stored JSON that may hold a trace context.
var traceKey = []byte(`"trace"`)

// traces decodes the trace contexts of c's creation and of its messages.
// A trace context that does not decode is left out: it only loses a link.
func traces(c *claimed) (task map[string]string, msgs []map[string]string) {
	if len(c.trace) > 0 {
		_ = json.Unmarshal(c.trace, &task)
	}
	for _, raw := range c.inbox {
		// Most envelopes carry none; they are not decoded twice.
		if !bytes.Contains(raw, traceKey) {
			continue
		}
		var env struct {
			Trace map[string]string `json:"trace"`
		}
		if json.Unmarshal(raw, &env) == nil && len(env.Trace) > 0 {
			msgs = append(msgs, env.Trace)
		}
	}
	return task, msgs
}
