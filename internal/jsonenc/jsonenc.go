// Package jsonenc encodes the values callers hand to corotask (states,
// messages, results) for the database's jsonb columns, the same way in every
// package.
package jsonenc

import (
	"encoding/json"
	"fmt"
)

// Encode encodes v as JSON for a jsonb column: nil stays nil (SQL NULL), a
// json.RawMessage or []byte must already be valid JSON and is kept as it is.
func Encode(v any) ([]byte, error) {
	switch b := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if b == nil {
			return nil, nil
		}
		if !json.Valid(b) {
			return nil, fmt.Errorf("invalid JSON: %.60q", string(b))
		}
		return b, nil
	case []byte:
		if !json.Valid(b) {
			return nil, fmt.Errorf("invalid JSON: %.60q", string(b))
		}
		return b, nil
	}
	return json.Marshal(v)
}
