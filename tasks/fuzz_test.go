package tasks_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/jsonenc"
	"github.com/corotask/corotask/tasks"
)

// Run with: go test ./tasks -run '^$' -fuzz FuzzParseID -fuzztime 1m (one
// fuzz target at a time). The seeds below run with every go test.

func FuzzParseID(f *testing.F) {
	id := tasks.NewID()
	for _, s := range []string{id.String(), strings.ToLower(id.String()), id.UUID(), strings.ToUpper(id.UUID()),
		strings.ReplaceAll(id.UUID(), "-", ""), "", "nope", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ",
		"01ARZ3NDEKTSV4RRFFQ69G5FAI", "00000000-0000-0000-0000-000000000000", "0123456789abcdef0123456789abcde+",
		"01234567-89ab-cdef-0123-456789abcde-", "01234567-89ab-cdef-0123-456789ab-def", "x'); DROP TABLE corotask.tasks; --"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := tasks.ParseID(s)
		if err != nil {
			require.ErrorContains(t, err, "invalid task id")
			require.Equal(t, tasks.ID{}, id)
			return
		}
		// Whatever parses prints back as itself (up to case and dashes) and
		// round-trips through every form.
		switch len(s) {
		case 26:
			require.True(t, strings.EqualFold(id.String(), s), "%q printed as %s", s, id)
		case 36:
			require.Equal(t, strings.ToLower(s), id.UUID())
		case 32:
			require.Equal(t, strings.ToLower(s), strings.ReplaceAll(id.UUID(), "-", ""))
		default:
			t.Fatalf("%q (%d bytes) parsed", s, len(s))
		}
		for _, form := range []string{id.String(), id.UUID()} {
			back, err := tasks.ParseID(form)
			require.NoError(t, err)
			require.Equal(t, id, back)
		}
		b, err := json.Marshal(id)
		require.NoError(t, err)
		var back tasks.ID
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, id, back)
		text, err := id.MarshalText()
		require.NoError(t, err)
		require.NoError(t, back.UnmarshalText(text))
		require.Equal(t, id, back)
	})
}

// FuzzIDUnmarshalJSON checks that an ID reads from JSON exactly what
// encoding/json reads as a string (escapes included), or null.
func FuzzIDUnmarshalJSON(f *testing.F) {
	id := tasks.NewID()
	for _, s := range []string{`"` + id.String() + `"`, `"` + id.UUID() + `"`, `null`, `""`, `"x"`, `1`, `{}`, `[]`, `"`,
		`"\u0030\u0031ARZ3NDEKTSV4RRFFQ69G5FAV"`, `"01ARZ3NDEKTSV4RRFFQ69G5FA\u0056"`, `"\"01ARZ3NDEKTSV4RRFFQ69G5FAV\""`,
		`"01ARZ3NDEKTSV4RRFFQ69G5FAV\n"`, ` "01ARZ3NDEKTSV4RRFFQ69G5FAV"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got tasks.ID
		err := json.Unmarshal(b, &got)
		// What encoding/json makes of the same bytes as a string or null.
		var ptr *string
		switch jsonErr := json.Unmarshal(b, &ptr); {
		case jsonErr != nil:
			require.Error(t, err, "accepted %q, which is not a JSON string", b)
		case ptr == nil:
			require.NoError(t, err, "%q is null", b)
			require.True(t, got.IsZero())
		default:
			want, perr := tasks.ParseID(*ptr)
			if perr != nil {
				require.Error(t, err, "accepted %q", b)
				return
			}
			require.NoError(t, err, "refused %q, a JSON string holding the valid ID %q", b, *ptr)
			require.Equal(t, want, got)
		}
	})
}

func FuzzTypeValidate(f *testing.F) {
	for _, s := range []string{"orders.checkout", "ünïcode type", "", " lead", "trail ", "tab\there", "nl\n", "\xff",
		strings.Repeat("a", 200), strings.Repeat("a", 201), strings.Repeat("é", 100), "x'); DROP TABLE corotask.tasks; --", "\u00a0nbsp"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := tasks.Type(s).Validate()
		valid := s != "" && len(s) <= tasks.MaxTypeLen && utf8.ValidString(s) && strings.TrimSpace(s) == s &&
			strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
		if valid {
			require.NoError(t, err, "%q", s)
		} else {
			require.ErrorContains(t, err, "invalid task type", "%q", s)
		}
	})
}

func FuzzEncodeJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,2]`, `"x"`, `null`, `1e400`, `{"a":}`, ``, `{`, "\xff", `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, v := range []any{b, json.RawMessage(b)} {
			got, err := jsonenc.Encode(v)
			switch raw, isRaw := v.(json.RawMessage); {
			case isRaw && raw == nil:
				require.NoError(t, err)
				require.Nil(t, got)
			case json.Valid(b):
				require.NoError(t, err)
				require.Equal(t, b, got, "valid JSON is passed through as it is")
			default:
				require.ErrorContains(t, err, "invalid JSON")
			}
		}
	})
}
