package executor

// Who owns what, inside an Executor.
//
// Goroutines:
//
//   - Run's own goroutine runs the claim loop (claimLoop): it asks the
//     claimer for a claim of what the slots have room for, and hands each
//     claimed task to the polls. It then runs the stop.
//   - One goroutine per poll (polls.run), from its start to its settling:
//     it polls, frees its slot, has the committer settle the outcome, and
//     forgets its claim. polls.wg counts these, and the give-backs started
//     in the background (polls.background).
//   - Run's services (services.go), each a loop in a goroutine of its own:
//     the heartbeats (the keeper renews every claim in flight), the
//     registration (the executor's row), the committers (committers batch
//     loops, committer.run), the listener (LISTEN), retention and vacuum.
//
// State:
//
//   - slots owns every counter of claims and polls (in flight, polling, per
//     type, waiting, reserved for eager children) and the polls' base
//     context, under its own mutex; every other part asks it.
//   - claimer owns the claim statement's inputs and outputs: the floors of
//     its searches and when it last looked for stale claims.
//   - committer owns the queue of outcomes, the turn of the batches and the
//     committing context; it starts the eager children a batch created,
//     which bypass the claim and its order.
//   - polls owns the poll goroutines (wg); heartbeats the keeper; listener
//     its connection; registration the executor's row.
//   - env is shared and not replaced after New: identity, pool, config,
//     logger, hooks, the registered pollers (their own mutex), the schema
//     guard (atomics) and the claim loop's wake channel.
//
// The order of the stop (Run, once its context ends): the claim loop
// returns; slots are closed and the waiting tasks given back (polls.stop);
// the polls get ShutdownTimeout to finish, then are canceled (polls.drain);
// the services stop together (services.stop), the registration marking the
// executor stopped as it returns; the log of canceled polls is flushed.

import (
	"errors"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/cause"
	"github.com/corotask/corotask/tasks"
)

// The causes of a poll's context being canceled (context.Cause(ctx)), all
// defined here. After any of them the poll's outcome is not committed.
var (
	// ErrClaimLost: the claim no longer matches the database: the task was
	// canceled, released, or claimed by another executor after this one's
	// claim expired.
	ErrClaimLost = cause.ClaimLost
	// ErrRenewTimeout: the claim could not be renewed (database errors, or a
	// renewal that did not finish in time) before it expired; by then another
	// executor may own the task, so the poll must stop.
	ErrRenewTimeout = cause.RenewTimeout
	// ErrCanceled: the task was canceled (tasks.Cancel).
	ErrCanceled = cause.Canceled
	// ErrShutdown: the executor stopped before the poll finished (after
	// Config.ShutdownTimeout). Its claim is released, not counted as a failure.
	ErrShutdown = cause.Shutdown
	// ErrPollTimeout: the poll ran past its type's PollTimeout. The cause
	// wraps it, with the timeout and the type in its text; the poll counts
	// as failed (backoff, MaxFailures), whatever it returns.
	ErrPollTimeout = errors.New("poll timed out")
)

// Executor claims ready tasks of the types registered with it, polls them
// and commits their outcomes. Create one with New, register pollers with
// Register, then call Run. Any number of executors, in any number of
// processes, may work on one database.
type Executor struct {
	env       *env
	slots     *slots
	claimer   *claimer
	committer *committer
	polls     *polls
	beats     *heartbeats
	listener  *listener
}

// New returns an Executor that works on pool, configured by cfg (see Config
// for the defaults and limits). It returns an error that names the field and
// the rule when cfg is outside its limits, and when pool is nil. The pool must
// allow at least two connections: one for LISTEN (unless disabled) and one for
// claims and commits; a pool about as large as the number of polls that commit
// at once is best. Heartbeats use a connection of their own, opened like the
// pool's but outside it.
func New(pool *pgxpool.Pool, cfg Config) (*Executor, error) {
	if pool == nil {
		return nil, errors.New("executor: New needs a pool (it was nil)")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newExecutor(pool, cfg), nil
}

// MustNew is New for a configuration known to be valid (a literal in a
// program or a test): it panics where New returns an error.
func MustNew(pool *pgxpool.Pool, cfg Config) *Executor {
	e, err := New(pool, cfg)
	if err != nil {
		panic(err)
	}
	return e
}

func newExecutor(pool *pgxpool.Pool, cfg Config) *Executor {
	v := &env{
		id:             tasks.NewID(),
		pool:           pool,
		cfg:            cfg,
		log:            cfg.Logger,
		hooks:          hookCaller{cfg.Hooks},
		pollers:        newPollers(),
		canceled:       &canceledPolls{log: cfg.Logger},
		controlled:     &controlledTypes{},
		distribution:   &distribution{},
		severedRetries: sync.OnceValue(func() int { return int(pool.Config().MaxConns) + 1 }),
		wake:           make(chan struct{}, 1),
	}
	if cfg.PrioritySlots > 0 {
		v.laneWake = make(chan struct{}, 1)
	}
	v.schema = newSchemaGuard(cfg.Logger, pool, v.signal)
	beats := newHeartbeats(v)
	s := newSlots(v, beats)
	p := &polls{env: v, slots: s, beats: beats}
	p.commit = newCommitter(v, s, p)
	return &Executor{
		env:       v,
		slots:     s,
		claimer:   newClaimer(v, s),
		committer: p.commit,
		polls:     p,
		beats:     beats,
		listener:  &listener{env: v, polls: p, ready: make(chan struct{})},
	}
}

// ID returns the executor's ID: the claims it holds record it in
// corotask.tasks.claimed_by and the history of the tasks it polls in
// corotask.history.executor_id; once it runs, corotask.executors has its
// row under it.
func (e *Executor) ID() tasks.ID { return e.env.id }

// Pool returns the pool the executor works on, for pollers that read the
// database outside their commit (its clock, say).
func (e *Executor) Pool() *pgxpool.Pool { return e.env.pool }

func (e *Executor) register(typ tasks.Type, h handler) error {
	return e.env.pollers.add(typ, h)
}

// Types returns the registered task types.
func (e *Executor) Types() []tasks.Type {
	return e.env.pollers.types()
}
