package dberr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestFromSchema(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{
		"42883": true, "42P01": true, "42703": true, "42501": true, "42601": true,
		"22012": false, "40001": false, "57P01": false, "CT404": false, "P0001": false,
	} {
		err := fmt.Errorf("commit: %w", &pgconn.PgError{Code: code})
		require.Equal(t, want, FromSchema(err), code)
		require.Equal(t, code == "42501", PermissionDenied(err), code)
	}
	require.False(t, FromSchema(nil))
	require.False(t, FromSchema(errors.New("42883")))
}
