package executor

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

func TestTransientKnowsWhatIsPermanent(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("commit: %w", &pgconn.PgError{Code: code}) }
	for _, code := range []string{"57014", "55P03", "25006", "53300", "53200", "40001", "40P01", "08006", "08001", "57P01", "57P03", "XX000", "58030"} {
		require.True(t, transient(pg(code)), code)
	}
	for _, code := range []string{"CT410", "CT404", "22P02", "22001", "23505", "23503", "P0001", "P0004", "42P01", "42501", "0A000", "21000", "54000", "25P02", "25001"} {
		require.False(t, transient(pg(code)), code)
	}
	for _, err := range []error{tasks.ErrEnded, tasks.ErrNotFound, tasks.ErrTooLarge, tasks.ErrExists,
		&PanicError{Where: "OnCommit", Value: "boom"}, fmt.Errorf("%w: %w", errOnCommit, errors.New("refused")), nil,
		fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)} {
		require.False(t, transient(err), "%v", err)
	}
	// The driver's own errors are a broken connection.
	require.True(t, transient(fmt.Errorf("commit: %w", io.ErrUnexpectedEOF)))
	// A database error an OnCommit function passes on is the database's.
	require.True(t, transientDBError(fmt.Errorf("insert: %w", &pgconn.PgError{Code: "57014"})))
	require.False(t, transientDBError(errors.New("refused")))
	require.False(t, transientDBError(&pgconn.PgError{Code: "23505"}))
}
