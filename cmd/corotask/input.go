package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/corotask/corotask/tasks"
)

// parseID parses a task ID given on the command line; what names it in the
// error ("--parent", "TASK").
func parseID(what, s string) (tasks.ID, error) {
	id, err := tasks.ParseID(s)
	if err != nil {
		if what == "TASK" {
			return tasks.ID{}, usagef("%v", err)
		}
		return tasks.ID{}, usagef("%s: %v", what, err)
	}
	if id.IsZero() {
		return tasks.ID{}, usagef("invalid task id %q: the zero ID names no task", s)
	}
	return id, nil
}

// parseOptionalID is parseID for a flag that may be empty (the zero ID).
func parseOptionalID(what, s string) (tasks.ID, error) {
	if s == "" {
		return tasks.ID{}, nil
	}
	return parseID(what, s)
}

// parseJSON checks that data is one JSON value and returns it as is. A
// syntax error says where it is, e.g. "invalid JSON message at line 1,
// column 7: invalid character '}' looking for beginning of value"; what
// names the value ("message", "--state").
func parseJSON(what string, data []byte) (json.RawMessage, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, usagef("invalid JSON %s: empty", what)
	}
	// Unmarshal checks the whole input (trailing data included) before
	// decoding, and reports any syntax error with its offset.
	var raw json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			// Offset is the number of bytes read when the error was found:
			// the bad byte is the last one read, unless the input ended.
			pos := int(se.Offset) - 1
			if se.Offset >= int64(len(data)) && se.Error() == "unexpected end of JSON input" {
				pos = len(data)
			}
			line, col := lineColumn(data, pos)
			return nil, usagef("invalid JSON %s at line %d, column %d: %s", what, line, col, se.Error())
		}
		return nil, usagef("invalid JSON %s: %v", what, err)
	}
	return bytes.TrimSpace(data), nil
}

// lineColumn returns the 1-based line and column (in characters) of byte
// offset pos in data.
func lineColumn(data []byte, pos int) (line, col int) {
	pos = max(0, min(pos, len(data)))
	before := data[:pos]
	line = 1 + bytes.Count(before, []byte("\n"))
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
}

// parseTime parses an RFC 3339 time given to flag name.
func parseTime(name, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usagef("invalid %s %q: want an RFC 3339 time such as 2025-01-02T15:04:05Z", name, s)
	}
	return t, nil
}

// parseDuration parses a non-negative Go duration given to flag name.
func parseDuration(name, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, usagef("invalid %s %q: want a duration such as 90s, 15m or 2h", name, s)
	}
	if d < 0 {
		return 0, usagef("invalid %s %q: must not be negative", name, s)
	}
	return d, nil
}

// parseCount parses a positive integer given to flag name (zero too when
// zeroOK).
func parseCount(name, s string, zeroOK bool) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || (n == 0 && !zeroOK) {
		return 0, usagef("invalid %s %q: want a positive integer", name, s)
	}
	return n, nil
}

// readBounded reads r whole, up to limit bytes: a noun ("message",
// "state") read from what ("standard input").
func readBounded(r io.Reader, noun, what string, limit int) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if len(data) > limit {
		return nil, usagef("%s on %s is larger than %d bytes", noun, what, limit)
	}
	return data, nil
}
