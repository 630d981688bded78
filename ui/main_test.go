package ui_test

import (
	"os"
	"testing"

	"github.com/corotask/corotask/internal/testdb"
)

func TestMain(m *testing.M) {
	os.Exit(testdb.Main(m, 8))
}
