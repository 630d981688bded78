package tasks

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/oklog/ulid/v2"
)

// ID identifies a task. It is a ULID: 16 bytes whose first 6 are the creation
// time in milliseconds, so IDs sort by creation time. It is stored as a
// PostgreSQL uuid and printed as 26 characters of Crockford base32. The zero
// ID means "no task" (a root task's parent, a message from outside any task)
// and is stored as NULL.
type ID [16]byte

var (
	entropyMu sync.Mutex
	entropy   = ulid.Monotonic(rand.Reader, 0)
)

// NewID returns a new ID for the current time. IDs made by one process
// increase: within a millisecond the random part counts up, so children
// spawned by one poll list in the order they were spawned.
func NewID() ID {
	entropyMu.Lock()
	defer entropyMu.Unlock()
	return ID(ulid.MustNew(ulid.Timestamp(time.Now()), entropy))
}

// ParseID parses an ID from its ULID text (26 characters, case-insensitive) or
// from UUID text (36 characters with dashes, or 32 hex digits).
func ParseID(s string) (ID, error) {
	switch len(s) {
	case ulid.EncodedSize:
		u, err := ulid.ParseStrict(s)
		if err != nil {
			return ID{}, fmt.Errorf("invalid task id %q: not a ULID: %w", s, err)
		}
		return ID(u), nil
	case 36, 32:
		h := s
		if len(s) == 36 {
			if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
				return ID{}, fmt.Errorf("invalid task id %q: not a UUID", s)
			}
			h = strings.ReplaceAll(s, "-", "")
			if len(h) != 32 {
				return ID{}, fmt.Errorf("invalid task id %q: not a UUID", s)
			}
		}
		var id ID
		if _, err := hex.Decode(id[:], []byte(h)); err != nil {
			return ID{}, fmt.Errorf("invalid task id %q: not a UUID: %w", s, err)
		}
		return id, nil
	default:
		return ID{}, fmt.Errorf("invalid task id %q: want a 26-character ULID or a UUID", s)
	}
}

// String returns the ID as a 26-character ULID.
func (id ID) String() string { return ulid.ULID(id).String() }

// UUID returns the ID in the canonical UUID text form PostgreSQL prints.
func (id ID) UUID() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// IsZero reports whether id is the zero ID ("no task").
func (id ID) IsZero() bool { return id == ID{} }

// Time returns the creation time encoded in the ID.
func (id ID) Time() time.Time { return ulid.Time(ulid.ULID(id).Time()) }

// MarshalText implements encoding.TextMarshaler: the ULID text.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler, accepting ULID or UUID text.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// MarshalJSON encodes the zero ID as null and any other as a ULID string.
func (id ID) MarshalJSON() ([]byte, error) {
	if id.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + id.String() + `"`), nil
}

// UnmarshalJSON accepts null (the zero ID) or a string of ULID or UUID text.
func (id *ID) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		*id = ID{}
		return nil
	}
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return fmt.Errorf("invalid task id %s: want a JSON string", s)
	}
	text := s[1 : len(s)-1]
	if strings.ContainsRune(text, '\\') {
		// Escapes (\u0030...) are valid JSON for the same text.
		if err := json.Unmarshal(b, &text); err != nil {
			return fmt.Errorf("invalid task id %s: %w", s, err)
		}
	}
	return id.UnmarshalText([]byte(text))
}

// UUIDValue lets pgx store an ID in a uuid column; the zero ID is NULL.
func (id ID) UUIDValue() (pgtype.UUID, error) {
	return pgtype.UUID{Bytes: id, Valid: !id.IsZero()}, nil
}

// ScanUUID lets pgx read an ID from a uuid column; NULL is the zero ID.
func (id *ID) ScanUUID(v pgtype.UUID) error {
	if !v.Valid {
		*id = ID{}
		return nil
	}
	*id = ID(v.Bytes)
	return nil
}
