package dberr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestSevered(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{
		"57P01": true, "57P02": true, "57P05": true, "08006": true, "08003": true,
		"57P03": false, "53300": false, "08001": false, "57014": false, "40001": false, "42883": false,
	} {
		require.Equal(t, want, Severed(fmt.Errorf("claim: %w", &pgconn.PgError{Code: code})), code)
	}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	require.True(t, Severed(fmt.Errorf("commit: %w", reset)))
	require.True(t, Severed(fmt.Errorf("commit: %w", io.ErrUnexpectedEOF)))
	require.True(t, Severed(fmt.Errorf("renew: %w", pgconn.ErrConnClosed)))
	refused := &pgconn.ConnectError{Config: &pgconn.Config{}}
	require.False(t, Severed(fmt.Errorf("claim: %w", refused)), "a connection that cannot be opened is waited out")
	require.False(t, Severed(fmt.Errorf("commit: %w", context.DeadlineExceeded)), "a deadline is not a lost connection")
	require.False(t, Severed(fmt.Errorf("claim: %w", context.Canceled)))
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	require.False(t, Severed(fmt.Errorf("commit: %w", timeout)), "a socket timeout is not a lost connection")
	require.False(t, Severed(errors.New("a poller's own error")))
	require.False(t, Severed(nil))
}
