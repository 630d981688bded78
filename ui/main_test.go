package ui_test

import (
	"testing"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/internal/testexit"
)

func TestMain(m *testing.M) {
	testexit.Exit(testdb.Main(m, 8))
}
