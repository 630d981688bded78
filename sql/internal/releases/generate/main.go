// Command generate records the release of the function files of the sql
// package: run in its directory (go generate ./sql), it computes the checksum
// of functions/*.sql and, when it differs from the last release recorded in
// releases.go, records it there as the next release.
//
// It reads releases.go as text, not through the sql package, so that it runs
// on a file a merge left with conflict markers (see releases.Parse).
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/corotask/corotask/sql/internal/releases"
)

func main() {
	if err := run("functions", "releases.go"); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

// run records the release of the files in dir in the record at file.
func run(dir, file string) error {
	sum, err := releases.Checksum(os.DirFS(dir))
	if err != nil {
		return err
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read the record of releases: %w", err)
	}
	recorded := releases.Parse(src)
	if len(recorded) == 0 {
		return fmt.Errorf("%s records no release: restore it from version control", file)
	}
	next := releases.Next(recorded, sum)
	out := releases.Format(next)
	if bytes.Equal(out, src) {
		return nil
	}
	if err := os.WriteFile(file, out, 0o644); err != nil {
		return fmt.Errorf("write the record of releases: %w", err)
	}
	last := next[len(next)-1]
	if len(next) > len(recorded) {
		fmt.Printf("%s: functions release %d recorded\n", file, last.Number)
	}
	return nil
}
