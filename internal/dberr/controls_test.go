package dberr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestTranslateControls(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pg       *pgconn.PgError
		sentinel error
		text     string
	}{
		{&pgconn.PgError{Code: "CT4T4", Message: `corotask: unknown task type "jbo"`, Hint: "check its spelling"},
			UnknownType, `unknown task type "jbo" (check its spelling)`},
		{&pgconn.PgError{Code: "CT4P9", Message: `corotask: type "job" is paused already, since x by y`},
			Paused, `type "job" is paused already, since x by y`},
		{&pgconn.PgError{Code: "CT4N9", Message: `corotask: type "job" is not paused`}, NotPaused, `type "job" is not paused`},
		{&pgconn.PgError{Code: "CT4R4", Message: `corotask: no rate limit "api"`}, NoRateLimit, `no rate limit "api"`},
		{&pgconn.PgError{Code: "CT4K4", Message: `corotask: no key limit of key space "t"`}, NoKeyLimit, `no key limit of key space "t"`},
	} {
		for _, translate := range []func(error) error{Translate, TranslateInvalid} {
			err := translate(fmt.Errorf("pause: %w", c.pg))
			require.ErrorIs(t, err, c.sentinel, c.pg.Code)
			require.Equal(t, c.text, err.Error())
			var pg *pgconn.PgError
			require.True(t, errors.As(err, &pg))
		}
	}
}

func TestTranslateInvalid(t *testing.T) {
	t.Parallel()
	pgErr := &pgconn.PgError{Code: "22023", Message: `corotask: take 6 tokens of rate limit "api": more than its rate, 5`,
		Hint: "its bucket never holds more than its rate"}
	err := TranslateInvalid(pgErr)
	require.Equal(t, `take 6 tokens of rate limit "api": more than its rate, 5 (its bucket never holds more than its rate)`, err.Error())
	var pg *pgconn.PgError
	require.True(t, errors.As(err, &pg))
	// Not corotask's, or another code: as Translate leaves it.
	other := &pgconn.PgError{Code: "22023", Message: "invalid parameter"}
	require.Same(t, other, TranslateInvalid(other))
	require.Equal(t, pgErr, Translate(pgErr), "Translate leaves a bad value's error alone")
}
