package testexit_test

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/corotask/corotask/internal/testexit"
	"github.com/stretchr/testify/require"
)

// The helper process: exits through Exit with the code it is told.
func TestMain(m *testing.M) {
	switch os.Getenv("TESTEXIT_CODE") {
	case "0":
		testexit.Exit(0)
	case "3":
		testexit.Exit(3)
	}
	testexit.Exit(m.Run())
}

// Exit passes the code on, and a passing run exits without the race
// detector's pause, which the child is told to make 10 s long (a build
// without -race has none either).
func TestExit(t *testing.T) {
	t.Parallel()
	for _, code := range []int{0, 3} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "TESTEXIT_CODE="+map[int]string{0: "0", 3: "3"}[code], "GORACE=atexit_sleep_ms=10000")
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		if code == 0 {
			require.NoError(t, err)
			require.Less(t, took, 5*time.Second, "a passing run exits without the race detector's pause")
			continue
		}
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		require.Equal(t, code, exit.ExitCode())
	}
}
