package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestQuickstart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	var out bytes.Buffer
	require.NoError(t, run(ctx, url, &out))

	m := regexp.MustCompile(`^task (\S+) done: (.*)\n$`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	require.JSONEq(t, `{"Total": 100, "Messages": 10}`, m[2])
	id, err := tasks.ParseID(m[1])
	require.NoError(t, err)
	task, err := tasks.Get(ctx, testdb.Pool(t, url), id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status)
	require.Zero(t, task.InboxLen, "every message was taken")
}

// With its context canceled (Ctrl-C), the program returns the cancellation.
func TestQuickstartCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, run(ctx, testdb.URL(t), &bytes.Buffer{}), context.Canceled)
}
