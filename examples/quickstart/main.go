// Command quickstart is the first example of the README: a counter task that
// adds up the numbers sent to it, and ends when the total reaches 100.
//
//	go run ./examples/quickstart
//
// connects to $DATABASE_URL, else to the database corotask on the server on
// 127.0.0.1:5432 as user postgres (created when missing), and prints, for
// example,
//
//	task 01M84F3J1N8X8D7XG6Q4K5W2ZB done: {"Total": 100, "Messages": 10}
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/inbox"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// Counter is the durable state: saved after every poll that commits.
type Counter struct{ Total, Messages int }

// Add is the message type.
type Add struct{ N int }

func poll(ctx context.Context, t *executor.Task[Counter, Add]) (executor.Action, error) {
	for {
		m, ok := t.Inbox.Pop()
		if !ok {
			break
		}
		t.State.Total += m.Body.N
		t.State.Messages++
	}
	if t.State.Total >= 100 {
		return executor.DoneWith(t.State), nil // the parent, if any, is told
	}
	return executor.Suspend(), nil // until the next message
}

func main() {
	// Ctrl-C or SIGTERM stops the program: the executor lets its polls finish.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	url := os.Getenv("DATABASE_URL")
	if url == "" { // the CLI's default too: a database of its own, created when missing
		url = "postgres://postgres@127.0.0.1:5432/corotask"
		if created, err := corosql.EnsureDatabase(ctx, url); err != nil {
			log.Fatal(err)
		} else if created {
			log.Print("created database corotask (set DATABASE_URL to use another)")
		}
	}
	if err := run(ctx, url, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, url string, out io.Writer) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := corosql.Migrate(ctx, pool); err != nil { // idempotent, safe from many processes
		return err
	}

	e, err := executor.New(pool, executor.Config{}) // defaults: see "Configuration"
	if err != nil {
		return err
	}
	executor.Register(e, "demo.counter", executor.PollerFunc[Counter, Add](poll))
	runCtx, stopExecutor := context.WithCancel(ctx)
	defer stopExecutor()
	ran := make(chan error, 1)
	go func() { ran <- e.Run(runCtx) }() // until runCtx ends; then stops gracefully

	id, err := tasks.Create(ctx, pool, tasks.Spec{Type: "demo.counter"})
	if err != nil {
		return err
	}
	for range 10 {
		if err := inbox.Send(ctx, pool, id, tasks.ID{}, Add{N: 10}); err != nil {
			return err
		}
	}
	task, err := tasks.Wait(ctx, pool, id) // until the task ends, or ctx does
	stopExecutor()
	if err := errors.Join(err, <-ran); err != nil {
		return err
	}
	fmt.Fprintf(out, "task %s %s: %s\n", id, task.Status, task.Result)
	return nil
}
