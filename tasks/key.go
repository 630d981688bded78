package tasks

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxKeyLen is the longest task key accepted, in bytes.
const MaxKeyLen = 200

// ValidateKey returns an error that says what is wrong with key as a task
// key, or nil. A key names a task among the live tasks of its type (see
// Spec.Key): it is 1 to MaxKeyLen bytes of UTF-8 with no control character
// (keys reach an operator's terminal). The empty string is no key: Spec.Key
// leaves it out, and what looks a task up by key refuses it.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("invalid task key: empty (no key)")
	case len(key) > MaxKeyLen:
		return fmt.Errorf("invalid task key %.40q...: %d bytes, at most %d", key, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("invalid task key %q: not UTF-8", key)
	}
	for i, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("invalid task key %q: control character %U at byte %d", key, r, i)
		}
	}
	return nil
}
