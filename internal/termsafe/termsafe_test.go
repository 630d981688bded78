package termsafe

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"plain text, ünïcode, 日本語, emoji 🎉", "plain text, ünïcode, 日本語, emoji 🎉"},
		{"", ""},
		{"two\nlines\r\nand\ttab\rcr", "two lines and tab cr"},
		{"\x1b]52;c;aGVsbG8=\x07clip", `\x1b]52;c;aGVsbG8=\x07clip`},
		{"\x1b]0;title\x1b\\", `\x1b]0;title\x1b\`},
		{"\x1b[8mhidden\x1b[0m", `\x1b[8mhidden\x1b[0m`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		{"c1 \u009b31m csi \u009d osc", `c1 \u009b31m csi \u009d osc`},
		{"bidi \u202egnp.exe\u202c", `bidi \u202egnp.exe\u202c`},
		{"isolates \u2066a\u2069 \u2067\u2068", `isolates \u2066a\u2069 \u2067\u2068`},
		{"marks \u200e\u200f\u061c zero\u200bwidth \ufeff", `marks \u200e\u200f\u061c zero\u200bwidth \ufeff`},
		{"seps \u2028\u2029", `seps \u2028\u2029`},
		{"tags \U000E0041\U000E007F", `tags \U000e0041\U000e007f`},
		{"bad \xff\xc3 utf-8", `bad \xff\xc3 utf-8`},
		{`backslash \x1b stays`, `backslash \x1b stays`},
	} {
		require.Equal(t, tc.want, Line(tc.in), "%q", tc.in)
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	stack := "goroutine 7 [running]:\nmain.f()\n\t/src/main.go:12 +0x1d\n"
	require.Equal(t, stack, Text(stack))
	require.Equal(t, "line\n\tnext\\x1b[2J\\x0d over \\u202e", Text("line\n\tnext\x1b[2J\r over \u202e"))
}

func TestJSON(t *testing.T) {
	t.Parallel()
	in := "{\n  \"a\": \"\u009b\u202e\U000E0041 ok é\",\n  \"b\": [1, \"\\u001b\"]\n}"
	out := JSON(in)
	require.Equal(t, "{\n  \"a\": \"\\u009b\\u202e\\udb40\\udc41 ok é\",\n  \"b\": [1, \"\\u001b\"]\n}", out)
	var x, y any
	require.NoError(t, json.Unmarshal([]byte(in), &x))
	require.NoError(t, json.Unmarshal([]byte(out), &y))
	require.Equal(t, x, y)
	require.Equal(t, `{"a":1}`, JSON(`{"a":1}`))
}

// requireNoDangerous checks that out holds no character a terminal acts on,
// but those in keep.
func requireNoDangerous(t *testing.T, out, keep string) {
	t.Helper()
	require.True(t, utf8.ValidString(out), "%q", out)
	for _, r := range out {
		if bytes.ContainsRune([]byte(keep), r) {
			continue
		}
		require.False(t, Dangerous(r), "%U in %q", r, out)
	}
}

// FuzzEscape: whatever the input, Line prints no control character (nor a
// format character, nor bytes that are not UTF-8), Text none but line breaks
// and tabs, and JSON of valid JSON decodes to the same value. Text that
// needs no escape is returned as it is.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]52;c;x\x07", "\u009b2J", "a\u202eb", "\xff", "\U000E0041", "a\r\nb\tc",
		`{"k": "\u001b v"}`, "[\"\u2028\u0085\"]", "\"\xed\xa0\x80\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		line := Line(s)
		requireNoDangerous(t, line, "")
		text := Text(s)
		requireNoDangerous(t, text, "\n\t")
		if safe(s, "") {
			require.Equal(t, s, line)
		}
		if safe(s, "\n\t") {
			require.Equal(t, s, text)
		}
		if !json.Valid([]byte(s)) {
			return
		}
		var compact bytes.Buffer
		require.NoError(t, json.Compact(&compact, []byte(s)))
		out := JSON(compact.String())
		requireNoDangerous(t, out, "\n\t")
		var x, y any
		require.NoError(t, json.Unmarshal(compact.Bytes(), &x))
		require.NoError(t, json.Unmarshal([]byte(out), &y), "%q", out)
		require.Equal(t, x, y)
	})
}
