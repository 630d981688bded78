package schedule_test

import (
	"os"
	"testing"

	"github.com/corotask/corotask/corotasktest"
	_ "github.com/corotask/corotask/internal/testexit" // no race detector pause at exit
)

func TestMain(m *testing.M) {
	os.Exit(corotasktest.Main(m, 8))
}
