// Command corotask is how operators and scripts talk to corotask tasks:
// it applies the schema, creates tasks, sends them messages, lists, shows and
// cancels them. Run `corotask help` for the commands, and
// `corotask COMMAND --help` for each command's flags and an example.
//
// Install it with
//
//	go install github.com/corotask/corotask/cmd/corotask@latest
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/corotask/corotask/internal/bench"
)

func main() {
	// A worker process of `corotask bench oneshot -executors N` (or of
	// `corotask bench pressure`) runs its executor and exits here.
	bench.MaybeWorker()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
