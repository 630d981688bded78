// Command approval is a human-in-the-loop workflow: an order waits for a
// person to approve or reject it, reminds them while it waits, and gives up
// after a deadline.
//
// The order is a task of type approval.order whose key is its order number
// (PO-482913): what knows only the number, such as a webhook of the system
// where the person decides, sends the decision to the order by it
// (inbox.SendToKey, or corotask send --type approval.order --key PO-482913),
// and no two waiting orders have the same number. Each poll looks at its inbox:
// a message {"approve": true} approves the order, {"approve": false} rejects
// it (an optional "reason" is kept), and the task ends with the outcome. With
// no decision yet, the task sends itself a reminder by sleeping: it returns
// Sleep until the next reminder is due, and when it wakes with an empty inbox
// it prints the reminder and sleeps again. A message wakes it at once. Past
// its deadline it ends as timed out. While the order waits, nothing of it is
// in memory: it is a row in the database with a wake_at, and the executor
// that polls it may be restarted, or be another process, at any time.
//
//	go run ./examples/approval
//
// creates an order, prints the exact commands that approve or reject it (on
// the database the program uses: here database corotask on 127.0.0.1:5432; a
// password is never printed), and runs an executor until the order ends:
//
//	order PO-482913 (task 01M80BQXCCNEJD5WAAXATW0K2C) for a new laptop waits for approval until 2026-11-23 00:50:47 (a reminder every 10s)
//	approve it from another shell with:
//
//	    corotask --database-url postgres://postgres@127.0.0.1:5432/corotask send --type approval.order --key PO-482913 '{"approve":true}'
//
//	or reject it with:
//
//	    corotask --database-url postgres://postgres@127.0.0.1:5432/corotask send --type approval.order --key PO-482913 '{"approve":false,"reason":"too expensive"}'
//
//	(from a clone of the repository, `go run ./cmd/corotask` works as `corotask`)
//	reminder 1: order PO-482913 for a new laptop waits for approval (23h59m50s left)
//	reminder 2: order PO-482913 for a new laptop waits for approval (23h59m40s left)
//
// Run one of the commands in another shell, and the program prints the
// outcome and exits:
//
//	order PO-482913 approved (after 2 reminders)
//
// Sending by key creates the task when none has the key: a decision for a
// number that no order waits with (one already decided, or never made)
// makes an order without an item, which its first poll ends as "no such
// order".
//
// A message that is not a decision is logged and ignored; with -strict it
// fails the poll instead, and every retry after it, until an operator drops
// it (docs/operations.md walks through finding and fixing that from the
// CLI). With
// -timeout 3s -remind 1s, the order times out while you watch:
//
//	order PO-207514 timed out (after 2 reminders)
//
// Stop the program with Ctrl-C while the order waits, and the order stays in
// the database: `go run ./examples/approval -order ID` waits for it again.
// The program's executor polls every approval.order task of the database, so
// orders left waiting by earlier runs remind (each with its own ID) while it
// runs.
//
// Flags:
//
//	-item TEXT        what the order is for (default "a new laptop")
//	-timeout D        how long the order waits for a decision (default 24h)
//	-remind D         how often it reminds (default 10s)
//	-order ID         wait for an existing order instead of creating one
//	-number NUMBER    the order number of the order created (default PO- and
//	                  6 random digits)
//	-strict           fail the poll on a message that is not a decision
//	--database-url U  the PostgreSQL URL (default $DATABASE_URL, else libpq's
//	                  PG* variables, else database corotask on 127.0.0.1:5432,
//	                  created when missing)
//	-v                debug logs
//
// An order can also be created without this program, with
// `corotask create --type approval.order --key PO-1 --state '{"item": "a chair", "number": "PO-1"}'`
// (without --key and number, the program names it by its task ID): its
// deadline is then set by its first poll, -timeout after it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

const orderType tasks.Type = "approval.order"

type config struct {
	DatabaseURL string
	Item        string
	Timeout     time.Duration // how long an order waits for a decision
	Remind      time.Duration // how often it reminds
	Order       string        // an existing order to wait for
	Number      string        // the order number of the order created: its task's key
	Strict      bool          // a message that is not a decision fails the poll
	Logger      *slog.Logger
}

func main() {
	var cfg config
	var verbose bool
	flag.StringVar(&cfg.DatabaseURL, "database-url", "", "the PostgreSQL `URL` (default: $DATABASE_URL, else libpq's PG* variables, else database corotask on 127.0.0.1:5432, created when missing)")
	flag.StringVar(&cfg.Item, "item", "a new laptop", "what the order is for")
	flag.DurationVar(&cfg.Timeout, "timeout", 24*time.Hour, "how long the order waits for a decision")
	flag.DurationVar(&cfg.Remind, "remind", 10*time.Second, "how often the order reminds")
	flag.StringVar(&cfg.Order, "order", "", "wait for the existing order `ID` instead of creating one")
	flag.StringVar(&cfg.Number, "number", "", "the order `NUMBER` of the order created (default: PO- and 6 random digits)")
	flag.BoolVar(&cfg.Strict, "strict", false, "fail the poll on a message that is not a decision, instead of ignoring it")
	flag.BoolVar(&verbose, "v", false, "debug logs")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "approval: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "approval:", err)
		os.Exit(1)
	}
}

// orderState is the durable state of an order.
type orderState struct {
	Item string `json:"item"`
	// Number is the order number, also the task's key; "" for an order
	// created without one (corotask create without --key).
	Number   string    `json:"number,omitempty"`
	Deadline time.Time `json:"deadline,omitzero"` // set by the first poll when zero
	// NextReminder is when the next reminder is due; zero until the first
	// poll, which sends none.
	NextReminder time.Time `json:"next_reminder,omitzero"`
	Reminders    int       `json:"reminders"` // reminders sent so far
}

// decision is the message a person sends: {"approve": true} or
// {"approve": false, "reason": "..."}.
type decision struct {
	Approve *bool  `json:"approve"`
	Reason  string `json:"reason,omitempty"`
}

// outcome is what an order ends with.
type outcome struct {
	Status    string `json:"status"` // "approved", "rejected", "timed out" or "no such order"
	Item      string `json:"item"`
	Reason    string `json:"reason,omitempty"`
	Reminders int    `json:"reminders"`
}

// orderPoller polls approval.order tasks. Its messages are taken as raw JSON
// and checked by the poll: they come from people, and one that is not a
// decision is reported and dropped (a typed poller would get a message that
// does not decode into its message type with Message.DecodeErr set, and
// could drop it the same way).
type orderPoller struct {
	timeout, remind time.Duration
	strict          bool      // fail on a message that is not a decision
	out             io.Writer // where reminders go
	log             *slog.Logger
	now             func() time.Time
}

func (p *orderPoller) Poll(ctx context.Context, t *executor.Task[orderState, json.RawMessage]) (executor.Action, error) {
	s := &t.State
	now := p.now()
	if s.Item == "" {
		// A decision sent by order number (inbox.SendToKey, corotask send
		// --key) when no order with that number waits creates a task
		// with it, with no item: there is nothing to decide.
		p.log.Warn("a message came for an order number that no order waits with", "task", t.ID, "messages", t.Inbox.Len())
		return executor.DoneWith(outcome{Status: "no such order"}), nil
	}
	if s.Deadline.IsZero() {
		s.Deadline = now.Add(p.timeout)
	}
	for {
		m, ok := t.Inbox.Pop()
		if !ok {
			break
		}
		d, err := parseDecision(m.Body)
		if err != nil && p.strict {
			// The poll fails and keeps the message: every retry fails on it
			// until an operator drops it (corotask drop-message).
			return executor.Action{}, fmt.Errorf("order %s: message %s is not a decision: %w", t.ID, m.Body, err)
		}
		if err != nil {
			p.log.Warn("ignoring a message that is not a decision", "order", t.ID, "message", string(m.Body), "error", err)
			continue
		}
		res := outcome{Status: "rejected", Item: s.Item, Reason: d.Reason, Reminders: s.Reminders}
		if *d.Approve {
			res.Status = "approved"
		}
		return executor.DoneWith(res), nil
	}
	if !now.Before(s.Deadline) {
		return executor.DoneWith(outcome{Status: "timed out", Item: s.Item, Reminders: s.Reminders}), nil
	}
	if !s.NextReminder.IsZero() && !now.Before(s.NextReminder) {
		// Printed before the commit, so a reminder may be printed twice if
		// the commit fails: what a poll does outside the commit happens at
		// least once.
		s.Reminders++
		fmt.Fprintf(p.out, "reminder %d: order %s for %s waits for approval (%s left)\n",
			s.Reminders, s.name(t.ID), s.Item, s.Deadline.Sub(now).Round(time.Second))
	}
	if s.NextReminder.IsZero() || !now.Before(s.NextReminder) {
		s.NextReminder = now.Add(p.remind)
	}
	// Sleep until the next reminder or the deadline, whichever comes first;
	// a decision wakes the task sooner.
	return executor.Sleep(min(s.NextReminder.Sub(now), s.Deadline.Sub(now))), nil
}

// name is how the program names an order: by its number, else its task.
func (s *orderState) name(id tasks.ID) string {
	if s.Number != "" {
		return s.Number
	}
	return id.String()
}

// parseDecision checks that body is a decision.
func parseDecision(body json.RawMessage) (decision, error) {
	var d decision
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, fmt.Errorf(`want {"approve": true} or {"approve": false}: %w`, err)
	}
	if d.Approve == nil {
		return d, errors.New(`want {"approve": true} or {"approve": false}: no "approve"`)
	}
	return d, nil
}

func run(ctx context.Context, cfg config, stdout io.Writer) error {
	if cfg.Timeout <= 0 || cfg.Remind <= 0 {
		return errors.New("-timeout and -remind must be positive")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	// The poller prints reminders while this goroutine prints too.
	stdout = &lockedWriter{w: stdout}
	tg := findTarget(cfg.DatabaseURL)
	if err := tg.ensureDatabase(ctx); err != nil {
		return err
	}
	db, err := pgxpool.New(ctx, tg.ConnString)
	if err != nil {
		return fmt.Errorf("invalid database URL: %w", err) // pgx's error names it, masked
	}
	defer db.Close()
	if err := corosql.Migrate(ctx, db); err != nil {
		return tg.Wrap("migrate", err)
	}

	var id tasks.ID
	var number string // the order's number, its task's key: "" for none
	if cfg.Order != "" {
		if id, err = tasks.ParseID(cfg.Order); err != nil {
			return fmt.Errorf("-order: %w", err)
		}
		task, err := tasks.Get(ctx, db, id)
		if err != nil {
			return err
		}
		if task.Type != orderType {
			return fmt.Errorf("task %s is a %s, not an %s", id, task.Type, orderType)
		}
		number = task.Key
		if number != "" {
			fmt.Fprintf(stdout, "waiting for order %s (task %s, %s)\n", number, id, task.Status)
		} else {
			fmt.Fprintf(stdout, "waiting for order %s (%s)\n", id, task.Status)
		}
	} else {
		number = cfg.Number
		if number == "" {
			number = fmt.Sprintf("PO-%06d", rand.IntN(1_000_000))
		}
		now := time.Now()
		// The order number is the task's key: what knows only the number
		// (a webhook, an operator) reaches the order by it, and no two
		// waiting orders have the same.
		id, err = tasks.Create(ctx, db, tasks.Spec{Type: orderType, Key: number, State: orderState{
			Item:     cfg.Item,
			Number:   number,
			Deadline: now.Add(cfg.Timeout),
		}})
		if errors.Is(err, tasks.ErrExists) {
			return fmt.Errorf("create order %s: %w (choose another -number)", number, err)
		}
		if err != nil {
			return fmt.Errorf("create order %s: %w", number, err)
		}
		fmt.Fprintf(stdout, "order %s (task %s) for %s waits for approval until %s (a reminder every %s)\n",
			number, id, cfg.Item, now.Add(cfg.Timeout).Format(time.DateTime), cfg.Remind)
	}
	// The commands reach the database this program uses, and name the
	// order as a webhook that knows only its number would (inbox.SendToKey).
	cli, note := tg.Command()
	to := id.String()
	if number != "" {
		to = fmt.Sprintf("--type %s --key %s", orderType, shellQuote(number))
	}
	fmt.Fprintf(stdout, "approve it from another shell with:\n\n    %s send %s '{\"approve\":true}'\n\n", cli, to)
	fmt.Fprintf(stdout, "or reject it with:\n\n    %s send %s '{\"approve\":false,\"reason\":\"too expensive\"}'\n\n", cli, to)
	if note != "" {
		fmt.Fprintf(stdout, "(%s)\n", note)
	}
	fmt.Fprintf(stdout, "(from a clone of the repository, `go run ./cmd/corotask` works as `corotask`)\n")

	e, err := executor.New(db, executor.Config{Logger: cfg.Logger})
	if err != nil {
		return err
	}
	executor.Register(e, orderType, &orderPoller{
		timeout: cfg.Timeout, remind: cfg.Remind, strict: cfg.Strict, out: stdout, log: cfg.Logger, now: time.Now,
	})
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	ran := make(chan error, 1)
	go func() { ran <- e.Run(runCtx) }()

	task, err := tasks.Wait(ctx, db, id)
	stopRun()
	name := id.String()
	if number != "" {
		name = number
	}
	if runErr := <-ran; runErr != nil {
		return runErr
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stdout, "stopped; order %s still waits: `go run ./examples/approval -order %s` waits for it again\n", name, id)
			return nil
		}
		return err
	}
	if task.Status != tasks.StatusDone {
		if task.LastError != "" {
			fmt.Fprintf(stdout, "order %s %s: %s\n", name, task.Status, task.LastError)
		} else {
			fmt.Fprintf(stdout, "order %s %s\n", name, task.Status)
		}
		return nil
	}
	var res outcome
	if err := json.Unmarshal(task.Result, &res); err != nil {
		return fmt.Errorf("order %s: result %s: %w", id, task.Result, err)
	}
	line := fmt.Sprintf("order %s %s (after %s)", name, res.Status, plural(res.Reminders, "reminder"))
	if res.Reason != "" {
		line += ": " + res.Reason
	}
	fmt.Fprintln(stdout, line)
	return nil
}

// plural returns "1 reminder", "2 reminders".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// lockedWriter serializes writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
