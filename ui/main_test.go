package ui_test

import (
	"os"
	"testing"

	"github.com/corotask/corotask/internal/testdb"
	_ "github.com/corotask/corotask/internal/testexit" // no race detector pause at exit
)

func TestMain(m *testing.M) {
	os.Exit(testdb.Main(m, 8))
}
