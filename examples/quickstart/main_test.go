package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// Without DATABASE_URL the program uses a database of its own, created when
// missing (not the server's maintenance database): once, whoever else
// creates it at the same time.
func TestCreateDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.AdminURL(t)
	// Named as the tests' databases are, so that one a killed run leaves is
	// swept by a later run.
	name := fmt.Sprintf("corotask_test_%d_%s", time.Now().Unix(), strings.ToLower(tasks.NewID().String()))
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, admin)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		require.NoError(t, err)
	})
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = createDatabase(ctx, admin, name) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, createDatabase(ctx, admin, name), "it exists: nothing to do")
	conn, err := pgx.Connect(ctx, testdb.WithDatabase(t, admin, name))
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
}
