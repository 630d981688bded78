// Command pingpong has two tasks play ping-pong through their inboxes, to
// show messages between tasks and how fast they go round.
//
// Both tasks are of type pingpong.player and know each other's ID. The server
// sends the first ball; each player, when a ball arrives, sends it back, until
// N round trips have been played; then both end with the number of balls they
// received. Each round trip is two polls, each woken by the other's message
// (LISTEN/NOTIFY), and two commits.
//
//	go run ./examples/pingpong
//	go run ./examples/pingpong -n 1000
//
// prints the players' IDs, then the speed, for example
//
//	players 01M80BSHSJ9G6PP1MVDMRXYY5K (serves) and 01M80BSHSJ5GYZ4XN3J0V9JYP1 play 200 round trips
//	200 round trips in 1.15s: 174 round trips/s (mean 5.7ms, slowest 21.2ms)
//
// Flags:
//
//	-n N              round trips to play (default 200)
//	--database-url U  the PostgreSQL URL (default $DATABASE_URL, else libpq's
//	                  PG* variables, else database corotask on 127.0.0.1:5432,
//	                  created when missing)
//	-v                debug logs
//
// The time is measured by the database, from the players' creation to the
// end of the last one; the mean and slowest round trips by the server, from
// the poll that sends a ball to the poll that receives it back.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

const playerType tasks.Type = "pingpong.player"

type config struct {
	DatabaseURL string
	N           int // round trips
	Logger      *slog.Logger
}

func main() {
	var cfg config
	var verbose bool
	flag.StringVar(&cfg.DatabaseURL, "database-url", "", "the PostgreSQL `URL` (default: $DATABASE_URL, else libpq's PG* variables, else database corotask on 127.0.0.1:5432, created when missing)")
	flag.IntVar(&cfg.N, "n", 200, "round trips to play")
	flag.BoolVar(&verbose, "v", false, "debug logs")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "pingpong: unexpected arguments %q\n", flag.Args())
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
		fmt.Fprintln(os.Stderr, "pingpong:", err)
		os.Exit(1)
	}
}

// playerState is the durable state of a player.
type playerState struct {
	Peer     tasks.ID `json:"peer"`
	Rounds   int      `json:"rounds"`          // round trips to play
	Serve    bool     `json:"serve,omitempty"` // this player sends the first ball
	Served   bool     `json:"served,omitempty"`
	Received int      `json:"received"` // balls received so far
	// Round trips measured by the server.
	RoundTripTotal time.Duration `json:"round_trip_total,omitempty"`
	RoundTripMax   time.Duration `json:"round_trip_max,omitempty"`
}

// ball is the message the players exchange.
type ball struct {
	Seq    int       `json:"seq"`     // 1 to Rounds
	SentAt time.Time `json:"sent_at"` // when the server sent it
}

// player returns the poller of pingpong.player tasks.
func player(log *slog.Logger) executor.PollerFunc[playerState, ball] {
	return func(ctx context.Context, t *executor.Task[playerState, ball]) (executor.Action, error) {
		return play(log, t)
	}
}

func play(log *slog.Logger, t *executor.Task[playerState, ball]) (executor.Action, error) {
	s := &t.State
	if s.Serve && !s.Served {
		s.Served = true
		t.Send(s.Peer, ball{Seq: 1, SentAt: time.Now()})
	}
	for {
		b, ok := t.Inbox.Pop()
		if !ok {
			break
		}
		if b.From != s.Peer {
			log.Warn("ignoring a message that does not come from the peer", "task", t.ID, "from", b.From, "peer", s.Peer)
			continue
		}
		s.Received++
		if !s.Serve {
			// Send it back as it came. The last one too: the server ends
			// when it receives it.
			t.Send(s.Peer, b.Body)
			if b.Body.Seq == s.Rounds {
				return executor.DoneWith(s.Received), nil
			}
			continue
		}
		rt := time.Since(b.Body.SentAt)
		s.RoundTripTotal += rt
		s.RoundTripMax = max(s.RoundTripMax, rt)
		if b.Body.Seq == s.Rounds {
			return executor.DoneWith(s.Received), nil
		}
		t.Send(s.Peer, ball{Seq: b.Body.Seq + 1, SentAt: time.Now()})
	}
	return executor.Suspend(), nil
}

func run(ctx context.Context, cfg config, stdout io.Writer) error {
	if cfg.N < 1 {
		return fmt.Errorf("-n %d: want at least one round trip", cfg.N)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	tg := findTarget(cfg.DatabaseURL)
	if err := tg.ensureDatabase(ctx); err != nil {
		return err
	}
	pc, err := pgxpool.ParseConfig(tg.ConnString)
	if err != nil {
		return fmt.Errorf("invalid database URL: %w", err) // pgx's error names it, masked
	}
	db, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return tg.Wrap("open pool on", err)
	}
	defer db.Close()
	if err := corosql.Migrate(ctx, db); err != nil {
		return tg.Wrap("migrate", err)
	}

	e, err := executor.New(db, executor.Config{Concurrency: 2, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	executor.Register(e, playerType, player(cfg.Logger))
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	ran := make(chan error, 1)
	go func() { ran <- e.Run(runCtx) }()

	// The players are created together, each knowing the other's ID.
	server, receiver := tasks.NewID(), tasks.NewID()
	if _, err := tasks.CreateMany(ctx, db, []tasks.Spec{
		{ID: server, Type: playerType, State: playerState{Peer: receiver, Rounds: cfg.N, Serve: true}},
		{ID: receiver, Type: playerType, State: playerState{Peer: server, Rounds: cfg.N}},
	}); err != nil {
		return fmt.Errorf("create players: %w", err)
	}
	fmt.Fprintf(stdout, "players %s (serves) and %s play %d round trips\n", server, receiver, cfg.N)

	var ended [2]*tasks.Task
	for i, id := range []tasks.ID{server, receiver} {
		if ended[i], err = tasks.Wait(ctx, db, id); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted; the players are left in the database: cancel them with %s", tg.Commands("cancel "+server.String(), "cancel "+receiver.String()))
			}
			return err
		}
	}
	stopRun()
	if err := <-ran; err != nil {
		return err
	}

	var st playerState
	for i, task := range ended {
		if task.Status != tasks.StatusDone {
			return fmt.Errorf("player %s %s: %s", task.ID, task.Status, task.LastError)
		}
		var received int
		if err := json.Unmarshal(task.Result, &received); err != nil {
			return fmt.Errorf("player %s: result %s: %w", task.ID, task.Result, err)
		}
		if received != cfg.N {
			return fmt.Errorf("player %s received %d balls, want %d", task.ID, received, cfg.N)
		}
		if i == 0 {
			if err := json.Unmarshal(task.State, &st); err != nil {
				return fmt.Errorf("player %s: state: %w", task.ID, err)
			}
		}
	}
	if st.Received == 0 {
		return errors.New("the server received no ball")
	}
	last := *ended[0].DoneAt
	if ended[1].DoneAt.After(last) {
		last = *ended[1].DoneAt
	}
	elapsed := last.Sub(ended[0].CreatedAt)
	fmt.Fprintf(stdout, "%d round trips in %s: %.0f round trips/s (mean %s, slowest %s)\n",
		cfg.N, elapsed.Round(10*time.Millisecond), float64(cfg.N)/elapsed.Seconds(),
		(st.RoundTripTotal / time.Duration(st.Received)).Round(100*time.Microsecond),
		st.RoundTripMax.Round(100*time.Microsecond))
	return nil
}
