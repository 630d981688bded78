package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/schedule"
)

// The schedule creates a report each second; the program prints two, then
// deletes the schedule.
func TestSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	var out bytes.Buffer
	require.NoError(t, run(ctx, config{url: url, every: time.Second, n: 2}, &out))
	require.Regexp(t, regexp.MustCompile(`^schedule demo\.reports: a reports\.build task every 1s \(task \S+\)
report 1 for slot \S+: 3 items
report 2 for slot \S+: 3 items
schedule demo\.reports deleted
$`), out.String())
	all, err := schedule.List(ctx, testdb.Pool(t, url))
	require.NoError(t, err)
	require.Empty(t, all, "deleted")
}

// With its context canceled (Ctrl-C), the program returns the cancellation.
func TestScheduleCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, run(ctx, config{url: testdb.URL(t), every: time.Second, n: 1}, &bytes.Buffer{}), context.Canceled)
}
