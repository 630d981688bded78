package tasks_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/tasks"
)

func TestIDRoundTrips(t *testing.T) {
	t.Parallel()
	id := tasks.NewID()
	require.Len(t, id.String(), 26)
	require.False(t, id.IsZero())

	fromULID, err := tasks.ParseID(id.String())
	require.NoError(t, err)
	require.Equal(t, id, fromULID)

	fromUUID, err := tasks.ParseID(id.UUID())
	require.NoError(t, err)
	require.Equal(t, id, fromUUID)

	b, err := json.Marshal(struct{ ID tasks.ID }{id})
	require.NoError(t, err)
	require.JSONEq(t, `{"ID":"`+id.String()+`"}`, string(b))
	var back struct{ ID tasks.ID }
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, id, back.ID)

	var zero struct{ ID tasks.ID }
	require.NoError(t, json.Unmarshal([]byte(`{"ID":null}`), &zero))
	require.True(t, zero.ID.IsZero())
	b, err = json.Marshal(zero)
	require.NoError(t, err)
	require.JSONEq(t, `{"ID":null}`, string(b))
}

func TestIDOrdersByTime(t *testing.T) {
	t.Parallel()
	a := tasks.NewID()
	b := tasks.NewID()
	require.False(t, b.Time().Before(a.Time()))
}

func TestParseIDRejectsGarbage(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "nope", "01ARZ3NDEKTSV4RRFFQ69G5FA", "01ARZ3NDEKTSV4RRFFQ69G5FAVX",
		"8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz", "0123456789abcdef0123456789abcdeg",
		"01234567-89ab-cdef-0123-456789abcde-"} {
		_, err := tasks.ParseID(s)
		require.Error(t, err, "%q", s)
		require.Contains(t, err.Error(), "invalid task id")
	}
}

func TestTypeValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, tasks.Type("orders.checkout").Validate())
	require.NoError(t, tasks.Type("ünïcode type").Validate())
	for _, bad := range []tasks.Type{"", " lead", "trail ", "tab\there", "nl\n", tasks.Type(make([]byte, 201)), "\xff"} {
		require.Error(t, bad.Validate(), "%q", bad)
	}
}

func TestParseStatus(t *testing.T) {
	t.Parallel()
	for _, s := range tasks.Statuses {
		got, err := tasks.ParseStatus(string(s))
		require.NoError(t, err)
		require.Equal(t, s, got)
	}
	_, err := tasks.ParseStatus("zombie")
	require.ErrorContains(t, err, `invalid status "zombie"`)
	require.True(t, tasks.StatusCanceled.Ended())
	require.False(t, tasks.StatusRunning.Ended())
}

func TestNewIDIncreases(t *testing.T) {
	t.Parallel()
	prev := tasks.NewID()
	for i := 0; i < 10000; i++ {
		id := tasks.NewID()
		require.Positive(t, bytes.Compare(id[:], prev[:]))
		prev = id
	}
}
