// Package testexit ends a test binary without the race detector's pause.
//
// A binary built with -race sleeps for a second when it exits with code 0
// (the race detector's atexit_sleep_ms), to let goroutines still running
// report their races. A test binary needs no such pause: testing.M.Run
// fails the run for every race seen until it returns, in a test or outside
// one. Each package's TestMain ends with
//
//	testexit.Exit(m.Run())
//
// which takes a second off every package of `go test -race ./...`.
package testexit

import (
	"os"
	"syscall"
)

// Exit ends the process with code. Under the race detector a passing run
// (code 0) exits at once, skipping the detector's exit pause; anything
// else goes through os.Exit as usual.
func Exit(code int) {
	if code == 0 && raceEnabled {
		// os.Exit(0) would run the race detector's exit, which pauses; m.Run
		// has written and flushed everything the run reports.
		syscall.Exit(0)
	}
	os.Exit(code)
}
