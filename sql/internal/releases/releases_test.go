package releases_test

import (
	"crypto/sha256"
	"encoding/hex"
	"go/format"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/sql/internal/releases"
)

func sumOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// The checksum covers each .sql file's name and contents, in name order, and
// nothing else.
func TestChecksumCoversNamesAndContents(t *testing.T) {
	t.Parallel()
	got, err := releases.Checksum(fstest.MapFS{
		"b.sql":    {Data: []byte("two")},
		"a.sql":    {Data: []byte("one")},
		"notes.md": {Data: []byte("ignored")},
	})
	require.NoError(t, err)
	require.Equal(t, sumOf("a.sql\x00one\x00b.sql\x00two\x00"), got)
}

func TestNextRecordsChangedFilesAsANewRelease(t *testing.T) {
	t.Parallel()
	a, b := sumOf("a"), sumOf("b")
	recorded := []releases.Release{{Number: 8, Sum: a}}
	require.Equal(t, recorded, releases.Next(recorded, a), "unchanged files: no release")
	require.Equal(t, []releases.Release{{Number: 8, Sum: a}, {Number: 9, Sum: b}}, releases.Next(recorded, b))
	require.Len(t, recorded, 1, "the record passed in is left as it was")
	back := []releases.Release{{Number: 8, Sum: a}, {Number: 9, Sum: b}}
	require.Equal(t, releases.Release{Number: 10, Sum: a}, releases.Next(back, a)[2],
		"files back to an older release's contents are a new release")
}

func TestFormatIsGofmtedAndParsesBack(t *testing.T) {
	t.Parallel()
	rs := []releases.Release{{Number: 1, Sum: sumOf("a")}, {Number: 2, Sum: sumOf("b")}}
	src := releases.Format(rs)
	formatted, err := format.Source(src)
	require.NoError(t, err)
	require.Equal(t, string(formatted), string(src))
	require.Equal(t, rs, releases.Parse(src))
}

// A merge where both sides recorded a release reads as both sides' releases,
// the first of each number kept: the next release is above both.
func TestParseReadsBothSidesOfAConflict(t *testing.T) {
	t.Parallel()
	a, b, c := sumOf("a"), sumOf("b"), sumOf("c")
	src := `var functionReleases = []functionRelease{
	{8, "` + a + `"},
<<<<<<< HEAD
	{9, "` + b + `"},
=======
	{9, "` + c + `"},
>>>>>>> feature
}
`
	got := releases.Parse([]byte(src))
	require.Equal(t, []releases.Release{{Number: 8, Sum: a}, {Number: 9, Sum: b}}, got)
	require.Equal(t, 10, releases.Next(got, sumOf("merged"))[2].Number)
}
