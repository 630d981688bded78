package executor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/pgbouncer"
	"github.com/corotask/corotask/internal/testdb"
)

// The LISTEN probe hears its notification on a direct connection, and not
// behind PgBouncer in transaction mode, where LISTEN holds on a server
// connection the listener does not keep. (Run finds such a pooler before it
// gets to this probe, when no other client is at work; with other clients,
// this probe is what finds it.)
func TestProbeListen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := testdb.URL(t)
	heard, err := probeListen(ctx, testdb.Pool(t, direct), listenProbeTimeout)
	require.NoError(t, err)
	require.True(t, heard, "direct")

	through := pgbouncer.Start(t, direct, pgbouncer.Options{})
	pool := testdb.Pool(t, through+"&default_query_exec_mode=cache_describe")
	// However long it waits, the notification does not come: a short wait
	// is no margin.
	heard, err = probeListen(ctx, pool, time.Second)
	require.NoError(t, err)
	require.False(t, heard, "behind PgBouncer in transaction mode")

	err = checkListen(ctx, pool, testdb.Logger(t), time.Second)
	require.ErrorIs(t, err, ErrListenUnreachable)
	require.ErrorContains(t, err, "set Config.DisableListen")
}
