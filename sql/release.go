package sql

//go:generate go run ./internal/releases/generate

// functionsRelease numbers the contents of sql/functions: it is the last
// release recorded in releases.go, which `go generate ./sql` writes. Whenever
// a function file changes, run `go generate ./sql` and commit releases.go
// with the change: when the files' checksum differs from the last release's,
// it records it as the next release (TestFunctionsReleaseFollowsTheFiles
// fails until then, naming the command). Never edit releases.go by hand.
// Each run that finds the files changed records a release: a number skipped
// is harmless, but to record one per change, restore releases.go (git
// checkout) before running it again. A merge that conflicts in releases.go:
// keep both sides' lines, or either side's, and run `go generate ./sql`
// again; it keeps the first release of each number and records the merged
// files as a new one.
//
// A database records the release its functions come from, and Migrate never
// replaces them with an older release's: in a rolling deploy, an older build
// that starts after a newer one keeps the newer functions (a function's
// signature never changes without a migration, which an older build refuses,
// so they serve it too).
var functionsRelease = functionReleases[len(functionReleases)-1].number

// functionRelease is one release of the function files recorded in
// releases.go: its number and the checksum of the files (see
// releases.Checksum).
type functionRelease struct {
	number int
	sum    string
}
