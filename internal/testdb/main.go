package testdb

import (
	"flag"
	"strconv"
	"testing"
)

// Main runs the tests of a package whose tests mostly wait (on the server,
// on an executor's timers) rather than compute, with up to parallel of them
// at once instead of go test's default of GOMAXPROCS, which leaves a machine
// with few CPUs idle. A -parallel given on the command line wins. Call it
// from TestMain: os.Exit(testdb.Main(m, 8)).
func Main(m *testing.M, parallel int) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && parallel > 0 {
		if err := flag.Set("test.parallel", strconv.Itoa(parallel)); err != nil {
			panic("testdb: set -test.parallel: " + err.Error())
		}
	}
	return m.Run()
}
