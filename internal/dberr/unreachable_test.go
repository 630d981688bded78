package dberr

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestUnreachable(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{
		"08P01": true, "08006": true, "57P01": true, "57P03": true, "53300": true,
		"42883": false, "42501": false, "57014": false, "40001": false, "CT404": false,
	} {
		require.Equal(t, want, Unreachable(fmt.Errorf("check: %w", &pgconn.PgError{Code: code})), code)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	require.True(t, Unreachable(fmt.Errorf("check: %w", refused)))
	require.True(t, Unreachable(fmt.Errorf("read: %w", io.ErrUnexpectedEOF)))
	require.False(t, Unreachable(errors.New("corotask schema at migration 7, this build needs 8")), "an answer, not a failure to reach")
	require.False(t, Unreachable(nil))
}
