package database

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// mistyped are connection strings with a password (S3cret) that a typo keeps
// pgx from reading as one, or that do not parse at all.
var mistyped = []string{
	"postgres//alice:S3cret@127.0.0.1/app",          // a missing colon
	"postgres:/alice:S3cret@127.0.0.1/app",          // a missing slash
	"postgres:alice:S3cret@127.0.0.1/app",           // no slashes
	"postgress://alice:S3cret@127.0.0.1:1/app",      // an unknown scheme
	"alice:S3cret@127.0.0.1/app",                    // no scheme
	"postgres://alice:pa@ss#S3cret@127.0.0.1:1/app", // an unescaped "@" and "#"
	"postgres://alice:S3cret@ss@127.0.0.1:1/app",    // an unescaped "@"
	"postgres://alice:S3cret#x@127.0.0.1:1/app",     // an unescaped "#"
	"postgres://alice:S3cret/x@127.0.0.1:1/app",     // an unescaped "/"
	"postgres://alice:S3cret@127.0.0.1:x/app",       // a bad port
	"host=127.0.0.1 port=1 user=alice password=S3cret dbname=app",
	"host=127.0.0.1 port=1 user=alice password='S3cret with space' dbname=app",
	"host=127.0.0.1 port=x user=alice password=S3cret",
	"host=127.0.0.1 port=1 password=S3cret junk",
	"host=127.0.0.1 port=1 password=Pa55word S3cret user=alice", // an unquoted space
}

// TestNoPasswordInMessages: for each mistyped connection string, neither
// Target.String (the "using" line), Redact, InvalidReason, nor the error of
// a connection attempt (ConnectError, ErrorText) holds the password.
func TestNoPasswordInMessages(t *testing.T) {
	t.Parallel()
	for _, s := range mistyped {
		for _, src := range []Source{FromFlag, FromDatabaseURL} {
			require.NotContains(t, Target{ConnString: s, Source: src}.String(), "S3cret", "%q", s)
			require.NotContains(t, Target{ConnString: s, Source: src}.String(), "Pa55word", "%q", s)
		}
		require.NotContains(t, RedactConnString(s), "S3cret", "%q", s)
		cfg, err := pgx.ParseConfig(s)
		if err != nil {
			reason := InvalidReason(s, err)
			require.NotContains(t, reason, "S3cret", "%q", s)
			require.NotContains(t, ErrorText(err), "S3cret", "%q", s)
			continue
		}
		cfg.ConnectTimeout = 0
		_, err = pgx.ConnectConfig(t.Context(), cfg)
		require.Error(t, err, "%q", s)
		tg := Target{ConnString: s, Source: FromDatabaseURL}
		for _, msg := range []string{ConnectError(tg.String(), err).Error(), ErrorText(err), ErrorText(fmt.Errorf("x: %w", err)),
			tg.Wrap("migrate", err).Error(), ConnectDetail(err)} {
			require.NotContains(t, msg, "S3cret", "%q", s)
		}
	}
}

// TestUnescapedPasswordHint: pgx takes the part of a password after an
// unescaped "@" for the host, and quotes it; the message masks it and says
// to percent-encode.
func TestUnescapedPasswordHint(t *testing.T) {
	t.Parallel()
	_, err := pgx.Connect(t.Context(), "postgres://alice:pa@ss#S3cret@127.0.0.1:1/app")
	var ce *pgconn.ConnectError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Contains(t, err.Error(), "ss#S3cret@127.0.0.1", "pgx quotes the host it found")
	detail := ConnectDetail(err)
	require.Contains(t, detail, "lookup xxxxx@127.0.0.1")
	require.Contains(t, detail, "must be percent-encoded")
	require.Equal(t, 1, strings.Count(detail, "percent-encoded"), detail)
}

func TestInvalidReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgress://alice:S3cret@127.0.0.1:1/app", "unknown scheme postgress: use postgres:// or postgresql://"},
		{"mysql://alice@db/app", "unknown scheme mysql: use postgres:// or postgresql://"},
		{"postgres//alice:S3cret@127.0.0.1/app", "the scheme postgres must be followed by ://"},
		{"postgresql:/alice:S3cret@127.0.0.1/app", "the scheme postgresql must be followed by ://"},
		{"postgres://alice:S3cret@127.0.0.1:x/app", "invalid port"},
		{"host=h password=S3cret port=abc", "invalid port"},
	} {
		_, err := pgx.ParseConfig(tc.in)
		require.Error(t, err, tc.in)
		got := InvalidReason(tc.in, err)
		require.Contains(t, got, tc.want, tc.in)
		require.NotContains(t, got, "S3cret", tc.in)
	}
}

func TestRedactConnString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"host=db password=s3 cret user=alice", "host=db password=xxxxx user=alice"},
		{"host=db password=s3 cret", "host=db password=xxxxx"},
		{"host=db password = 's3 cret' user=alice", "host=db password = xxxxx user=alice"},
		{"host=db password=s3cret sslpassword=a b sslmode=require", "host=db password=xxxxx sslpassword=xxxxx sslmode=require"},
		{"host=db user=alice", "host=db user=alice"},
		{"postgres://alice:s3cret@db/app", "postgres://alice:xxxxx@db/app"},
	} {
		require.Equal(t, tc.want, RedactConnString(tc.in), tc.in)
	}
}
