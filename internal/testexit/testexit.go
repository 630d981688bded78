// Package testexit takes the race detector's pause at exit out of test
// binaries.
//
// A binary built with -race sleeps for a second when it exits with code 0
// (the detector's atexit_sleep_ms, to let racing goroutines report): with
// twenty test packages, that is a good part of `go test -race ./...` on a
// small machine. A test binary that imports this package (a blank import
// next to its TestMain) starts itself again at once with
// atexit_sleep_ms=0 added to GORACE, unless GORACE sets it already. The
// race detector is otherwise as it was: a race found at any time, also
// after the tests have run, still fails the binary with exit code 66.
package testexit

import (
	"os"
	"strings"
	"syscall"
)

func init() {
	if !raceEnabled || strings.Contains(os.Getenv("GORACE"), "atexit_sleep_ms") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return // keep the pause
	}
	env := []string{"GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GORACE=") { // the first of two would win
			env = append(env, kv)
		}
	}
	_ = syscall.Exec(exe, os.Args, env) // returns only on failure: keep the pause
}
