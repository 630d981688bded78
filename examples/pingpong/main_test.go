package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

func TestPingPong(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 25} {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := testdb.URL(t)
			db := testdb.Pool(t, url)
			var out bytes.Buffer
			require.NoError(t, run(ctx, config{DatabaseURL: url, N: n, Logger: testdb.Logger(t)}, &out))

			m := regexp.MustCompile(`^players (\S+) \(serves\) and (\S+) play (\d+) round trips\n` +
				`(\d+) round trips in \S+: \d+ round trips/s \(mean \S+, slowest \S+\)\n$`).FindStringSubmatch(out.String())
			require.NotNil(t, m, out.String())
			require.Equal(t, m[3], m[4])
			require.Equal(t, strconv.Itoa(n), m[3])

			var states [2]playerState
			for i, s := range m[1:3] {
				id, err := tasks.ParseID(s)
				require.NoError(t, err)
				task, err := tasks.Get(ctx, db, id)
				require.NoError(t, err)
				require.Equal(t, tasks.StatusDone, task.Status)
				require.Equal(t, playerType, task.Type)
				require.JSONEq(t, strconv.Itoa(n), string(task.Result), "each player received n balls")
				require.Zero(t, task.InboxLen, "no ball left in flight")
				require.NoError(t, json.Unmarshal(task.State, &states[i]))
			}
			server, receiver := states[0], states[1]
			require.True(t, server.Serve)
			require.False(t, receiver.Serve)
			require.Equal(t, n, server.Received)
			require.Equal(t, n, receiver.Received)
			require.Positive(t, server.RoundTripTotal)
			require.LessOrEqual(t, server.RoundTripMax, server.RoundTripTotal)

			// Exactly the two players: no other task was made.
			list, err := tasks.List(ctx, db, tasks.Filter{})
			require.NoError(t, err)
			require.Len(t, list, 2)
		})
	}
}

func TestBadN(t *testing.T) {
	t.Parallel()
	require.EqualError(t, run(context.Background(), config{N: 0}, &bytes.Buffer{}), "-n 0: want at least one round trip")
}

// cancelOnWrite cancels a context at its first write.
type cancelOnWrite struct {
	bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.cancel()
	return w.Buffer.Write(p)
}

// Interrupted, the program prints the commands that cancel the players on
// the database it used.
func TestInterruptedPrintsCancelCommands(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelOnWrite{cancel: cancel}
	err := run(ctx, config{DatabaseURL: url, N: 1000000, Logger: testdb.Logger(t)}, out)
	require.Error(t, err)
	m := regexp.MustCompile(`^players (\S+) \(serves\) and (\S+) play`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	cli := "corotask --database-url " + shellQuote(url)
	require.Contains(t, err.Error(), "cancel them with `"+cli+" cancel "+m[1]+"` and `"+cli+" cancel "+m[2]+"`")
}
