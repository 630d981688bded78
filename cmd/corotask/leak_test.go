package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

// TestMistypedURLDoesNotLeakThePassword: a connection string whose password
// (S3cret) a typo hides from the parser, or that does not parse, is never
// printed whole, from the flag or DATABASE_URL: neither the "using" line nor
// the error (pgx's own included) holds the password.
func TestMistypedURLDoesNotLeakThePassword(t *testing.T) {
	t.Parallel()
	id := tasks.NewID().String()
	for _, tc := range []struct {
		url, want string
	}{
		{"postgres//alice:S3cret@127.0.0.1/app", "the scheme postgres must be followed by ://"},
		{"postgres:alice:S3cret@127.0.0.1/app", "the scheme postgres must be followed by ://"},
		{"alice:S3cret@127.0.0.1/app", "invalid database URL alice:xxxxx@127.0.0.1/app"},
		{"postgress://alice:S3cret@127.0.0.1:1/app", "unknown scheme postgress: use postgres:// or postgresql://"},
		{"postgres://alice:pa@ss#S3cret@127.0.0.1:1/app", "lookup xxxxx@127.0.0.1"},
		{"postgres://alice:S3cret@ss@127.0.0.1:1/app", "must be percent-encoded"},
		{"postgres://alice:S3cret#x@127.0.0.1:1/app", "cannot connect to postgres://alice:xxxxx@127.0.0.1:1/app"},
		{"postgres://alice:S3cret@127.0.0.1:x/app", "invalid port"},
		{"host=127.0.0.1 port=1 user=alice password=S3cret dbname=app", "cannot connect to"},
		{"host=127.0.0.1 port=1 user=alice password='S3cret with space' dbname=app", "cannot connect to"},
		{"host=127.0.0.1 port=x user=alice password=S3cret", "invalid port"},
		{"host=127.0.0.1 port=1 password=Pa55word S3cret user=alice", "invalid database URL host=127.0.0.1 port=1 password=xxxxx user=alice"},
	} {
		for _, r := range []result{
			runCLI(t, nil, "", "show", id, "--database-url", tc.url),
			runCLI(t, map[string]string{"DATABASE_URL": tc.url}, "", "ls"),
		} {
			require.NotEqual(t, exitOK, r.code, "%s", r)
			require.NotContains(t, r.stdout+r.stderr+r.using, "S3cret", "%q: %s", tc.url, r)
			require.NotContains(t, r.stdout+r.stderr+r.using, "with space", "%q: %s", tc.url, r)
			require.NotContains(t, r.stdout+r.stderr+r.using, "Pa55word", "%q: %s", tc.url, r)
			require.Contains(t, r.stderr, tc.want, "%q: %s", tc.url, r)
		}
	}
}
