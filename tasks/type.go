package tasks

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTypeLen is the longest task type accepted, in bytes.
const MaxTypeLen = 200

// Type names a kind of task, e.g. "orders.checkout". Executors register one
// poller per type. A valid type is non-empty, at most MaxTypeLen bytes of
// UTF-8, made of printable characters, with no leading or trailing space.
type Type string

// Validate returns an error that says what is wrong with t, or nil.
func (t Type) Validate() error {
	switch {
	case t == "":
		return fmt.Errorf("invalid task type: empty")
	case len(t) > MaxTypeLen:
		return fmt.Errorf("invalid task type %.40q...: %d bytes, at most %d", string(t), len(t), MaxTypeLen)
	case !utf8.ValidString(string(t)):
		return fmt.Errorf("invalid task type %q: not UTF-8", string(t))
	case strings.TrimSpace(string(t)) != string(t):
		return fmt.Errorf("invalid task type %q: leading or trailing space", string(t))
	}
	for i, r := range string(t) {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("invalid task type %q: unprintable character %U at byte %d", string(t), r, i)
		}
	}
	return nil
}
