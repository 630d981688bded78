package testdb

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

var (
	background sync.WaitGroup
	dropsMu    sync.Mutex
	// dropsAfter is set while Main runs the tests: a test's database is
	// dropped in the background, and Main waits for the drops.
	dropsAfter bool
	// dropSlots bounds the drops under way, each on a connection of its own.
	// Every DROP DATABASE waits for a checkpoint; drops under way together
	// share one, so many at once cost little more than one.
	dropSlots = make(chan struct{}, 16)
)

// dropLater runs drop in the background when Main will wait for it, and
// reports whether it did.
func dropLater(drop func() error) bool {
	dropsMu.Lock()
	defer dropsMu.Unlock()
	if !dropsAfter {
		return false
	}
	background.Go(func() {
		dropSlots <- struct{}{}
		defer func() { <-dropSlots }()
		if err := drop(); err != nil {
			// The test has ended; a database left behind is swept by a later run.
			fmt.Fprintf(os.Stderr, "test database: %v\n", err)
		}
	})
	return true
}

// panicking reports whether the calling goroutine is unwinding a panic, as
// a test's cleanups do when the test panicked (before t.Failed says so).
func panicking() bool {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for {
		f, more := frames.Next()
		if f.Function == "runtime.gopanic" {
			return true
		}
		if !more {
			return false
		}
	}
}

// Main runs the tests of a package whose tests mostly wait (on the server,
// on an executor's timers) rather than compute, with up to parallel of them
// at once instead of go test's default of GOMAXPROCS, which leaves a machine
// with few CPUs idle. A -parallel given on the command line wins. Call it
// from TestMain: os.Exit(testdb.Main(m, 8)).
//
// The tests' databases are dropped in the background (DROP DATABASE waits
// for a checkpoint: a second or more on a busy server), so that a test's
// slot goes to the next test at once; Main returns once all are dropped.
// Should a test panic, the process dies: the panicking test drops its own
// database first, but those of tests that ended just before may be left to
// the sweep of a later run.
func Main(m *testing.M, parallel int) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && parallel > 0 {
		if err := flag.Set("test.parallel", strconv.Itoa(parallel)); err != nil {
			panic("test database: set -test.parallel: " + err.Error())
		}
	}
	dropsMu.Lock()
	dropsAfter = true
	dropsMu.Unlock()
	code := m.Run()
	dropsMu.Lock()
	dropsAfter = false
	dropsMu.Unlock()
	background.Wait()
	return code
}
