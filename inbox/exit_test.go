package inbox_test

import (
	"testing"

	"github.com/corotask/corotask/internal/testexit"
)

// TestMain exits without the race detector's pause (see testexit).
func TestMain(m *testing.M) { testexit.Exit(m.Run()) }
