package heartbeat

import (
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/corotask/corotask/tasks"
)

// uuids is a uuid[] statement argument that pgx encodes without copying its
// elements: Index hands out pointers, where a slice of IDs has each element
// boxed on the heap (10,000 claims, 10,000 allocations per renewal).
type uuids []tasks.ID

// uuidElem is an element of uuids.
type uuidElem tasks.ID

func (u *uuidElem) UUIDValue() (pgtype.UUID, error) { return pgtype.UUID{Bytes: *u, Valid: true}, nil }

func (u uuids) Dimensions() []pgtype.ArrayDimension {
	if u == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(u)), LowerBound: 1}}
}

func (u uuids) Index(i int) any { return (*uuidElem)(&u[i]) }

func (u uuids) IndexType() any { return new(uuidElem) }
