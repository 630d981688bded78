package testexit_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	_ "github.com/corotask/corotask/internal/testexit"
)

// TestMain doubles as the helper process: told so by TESTEXIT_CHILD, it
// prints its GORACE, or races after the tests would have run.
func TestMain(m *testing.M) {
	switch os.Getenv("TESTEXIT_CHILD") {
	case "env":
		fmt.Print(os.Getenv("GORACE"))
		os.Exit(0)
	case "race":
		racy := 0
		done := make(chan struct{})
		go func() { racy++; close(done) }()
		racy++
		<-done
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(t *testing.T, mode, gorace string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TESTEXIT_CHILD="+mode, "GORACE="+gorace)
	out, err := cmd.Output()
	return string(out), err
}

// Under -race a test binary runs with atexit_sleep_ms=0 added to the
// GORACE it was given; one that sets atexit_sleep_ms itself is left alone.
func TestNoPauseAtExit(t *testing.T) {
	t.Parallel()
	got, err := child(t, "env", "history_size=2")
	require.NoError(t, err)
	if raceEnabled {
		require.Equal(t, "history_size=2 atexit_sleep_ms=0", got)
	} else {
		require.Equal(t, "history_size=2", got, "no race detector, nothing to change")
	}
	got, err = child(t, "env", "atexit_sleep_ms=5")
	require.NoError(t, err)
	require.Equal(t, "atexit_sleep_ms=5", got)
}

// A race after the tests have run still fails the binary (exit code 66).
func TestRacesAreStillReported(t *testing.T) {
	t.Parallel()
	_, err := child(t, "race", "")
	if !raceEnabled {
		require.NoError(t, err, "no race detector: the race goes unseen")
		return
	}
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the racy child exited with %v", err)
	require.Equal(t, 66, exit.ExitCode())
	require.True(t, strings.Contains(string(exit.Stderr), "DATA RACE"), string(exit.Stderr))
}
