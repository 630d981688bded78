package testdb

import (
	"bytes"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// bufferedRows is a pgx.Rows read to the end in advance.
type bufferedRows struct {
	conn   *pgx.Conn
	types  *pgtype.Map
	fields []pgconn.FieldDescription
	tag    pgconn.CommandTag
	raw    [][][]byte
	i      int // the current row plus one
}

// buffer reads r to the end and closes it.
func buffer(r pgx.Rows) (*bufferedRows, error) {
	defer r.Close()
	b := &bufferedRows{conn: r.Conn(), types: r.TypeMap()}
	for r.Next() {
		if b.fields == nil {
			b.fields = append([]pgconn.FieldDescription(nil), r.FieldDescriptions()...)
		}
		raw := make([][]byte, len(r.RawValues()))
		for i, v := range r.RawValues() {
			if v != nil {
				raw[i] = bytes.Clone(v)
			}
		}
		b.raw = append(b.raw, raw)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if b.fields == nil {
		b.fields = r.FieldDescriptions()
	}
	b.tag = r.CommandTag()
	return b, nil
}

func (b *bufferedRows) Close()                                       {}
func (b *bufferedRows) Err() error                                   { return nil }
func (b *bufferedRows) CommandTag() pgconn.CommandTag                { return b.tag }
func (b *bufferedRows) FieldDescriptions() []pgconn.FieldDescription { return b.fields }
func (b *bufferedRows) Conn() *pgx.Conn                              { return b.conn }
func (b *bufferedRows) TypeMap() *pgtype.Map                         { return b.types }

func (b *bufferedRows) Next() bool {
	if b.i > len(b.raw) {
		return false
	}
	b.i++
	return b.i <= len(b.raw)
}

func (b *bufferedRows) Scan(dest ...any) error {
	return pgx.ScanRow(b.types, b.fields, b.raw[b.i-1], dest...)
}

// Values decodes the current row as pgx does; only when asked, since not
// every value decodes to Go's types (jsonb's 1e400 does not).
func (b *bufferedRows) Values() ([]any, error) {
	row := b.raw[b.i-1]
	vals := make([]any, len(b.fields))
	for i, fd := range b.fields {
		if row[i] == nil {
			continue
		}
		dt, ok := b.types.TypeForOID(fd.DataTypeOID)
		if !ok {
			if fd.Format == pgx.TextFormatCode {
				vals[i] = string(row[i])
			} else {
				vals[i] = row[i]
			}
			continue
		}
		v, err := dt.Codec.DecodeValue(b.types, fd.DataTypeOID, fd.Format, row[i])
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return vals, nil
}
func (b *bufferedRows) RawValues() [][]byte { return b.raw[b.i-1] }

// bufferedRow is the pgx.Row of QueryRow: the first row of rows, or err.
type bufferedRow struct {
	rows *bufferedRows
	err  error
}

func (r *bufferedRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if !r.rows.Next() {
		return pgx.ErrNoRows
	}
	return r.rows.Scan(dest...)
}
