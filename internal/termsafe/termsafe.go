// Package termsafe escapes the characters of stored text that a terminal
// would act on instead of showing, so that the CLI prints what the database
// holds (a poll's error, which often quotes a remote service; a task type,
// a host name, a state written through SQL) without letting it move the
// cursor, set the window title, write the clipboard (OSC 52), hide text or
// reorder it.
//
// Escaped are: the C0 controls (U+0000 – U+001F, ESC among them), DEL, the C1
// controls (U+0080 – U+009F, which some terminals take as CSI and OSC), the
// format characters (Unicode category Cf: the bidirectional overrides,
// embeddings, isolates and marks U+202A – U+202E, U+2066 – U+2069, U+200E,
// U+200F, U+061C, the zero-width characters, the tag characters that can
// carry hidden text), the line and paragraph separators U+2028 and U+2029,
// and bytes that are not UTF-8. Each is written as a Go-style escape: \x1b,
// \u202e, \U000e0041, and \xff for a byte that is not UTF-8.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Dangerous reports whether r is a character termsafe escapes.
func Dangerous(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == '\u2028' || r == '\u2029' ||
		unicode.Is(unicode.Cf, r)
}

// Line returns s for one line of output (a table cell, a field): line
// breaks and tabs become spaces, the other dangerous characters escapes.
func Line(s string) string {
	if safe(s, "") {
		return s
	}
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s)
	return escape(s, "", goEscape)
}

// Text returns s for output of several lines (a stack trace): line breaks
// and tabs are kept, the other dangerous characters escaped ("\r" among
// them, which would let a line overwrite the one before).
func Text(s string) string {
	if safe(s, "\n\t") {
		return s
	}
	return escape(s, "\n\t", goEscape)
}

// JSON returns JSON text j (valid, as the database stores it) with the
// dangerous characters escaped as JSON escapes (\u009b, \u202e, a surrogate
// pair above U+FFFF): it decodes to the same value. Line breaks and tabs,
// which valid JSON holds only as space between values, are kept.
func JSON(j string) string {
	if safe(j, "\n\t") {
		return j
	}
	return escape(j, "\n\t", jsonEscape)
}

// safe reports whether s holds no dangerous character but those in keep.
func safe(s, keep string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || (Dangerous(r) && !strings.ContainsRune(keep, r)) {
			return false
		}
		i += n
	}
	return true
}

func escape(s, keep string, esc func(*strings.Builder, rune, bool)) string {
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			esc(&b, rune(s[i]), true)
		case Dangerous(r) && !strings.ContainsRune(keep, r):
			esc(&b, r, false)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// goEscape writes r as Go writes it in a quoted string; invalid: r is a
// byte that is not UTF-8.
func goEscape(b *strings.Builder, r rune, invalid bool) {
	switch {
	case invalid || r < 0x80:
		fmt.Fprintf(b, `\x%02x`, r)
	case r <= 0xffff:
		fmt.Fprintf(b, `\u%04x`, r)
	default:
		fmt.Fprintf(b, `\U%08x`, r)
	}
}

// jsonEscape writes r as a JSON string escape; a byte that is not UTF-8
// becomes U+FFFD, as encoding/json decodes it.
func jsonEscape(b *strings.Builder, r rune, invalid bool) {
	switch {
	case invalid:
		b.WriteString(`\ufffd`)
	case r <= 0xffff:
		fmt.Fprintf(b, `\u%04x`, r)
	default:
		r1, r2 := utf16.EncodeRune(r)
		fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
	}
}
