package heartbeat_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/heartbeat"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// countingDB counts the statements sent through it, and can be made to fail.
type countingDB struct {
	tasks.DB
	mu      sync.Mutex
	queries int
	fail    error
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.mu.Lock()
	c.queries++
	fail := c.fail
	c.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	return c.DB.Query(ctx, sql, args...)
}

// claim marks tasks as claimed the way an executor does, and returns their claims.
func claim(t *testing.T, db tasks.DB, n int) []heartbeat.Claim {
	t.Helper()
	ctx := context.Background()
	specs := make([]tasks.Spec, n)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "job"}
	}
	ids, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	out := make([]heartbeat.Claim, n)
	for i, id := range ids {
		var token pgtype.UUID
		require.NoError(t, db.QueryRow(ctx, `UPDATE corotask.tasks SET heartbeat = now() - interval '1 minute', claim = gen_random_uuid()
			WHERE task_id = $1 RETURNING claim`, id).Scan(&token))
		out[i] = heartbeat.Claim{Task: id, Token: token.Bytes}
	}
	return out
}

func TestRenewAllClaimsInOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := &countingDB{DB: testdb.New(t)}
	k := heartbeat.New(db, heartbeat.Config{Timeout: time.Minute})
	claims := claim(t, db.DB, 500)
	for _, c := range claims {
		k.Add(c, time.Now(), func(cause error) { t.Errorf("claim %s lost: %v", c.Task, cause) })
	}
	require.Equal(t, 500, k.Len())
	require.NoError(t, k.Renew(ctx))
	require.Equal(t, 1, db.queries, "one statement for all claims")

	var fresh int
	require.NoError(t, db.DB.QueryRow(ctx, `SELECT count(*) FROM corotask.tasks WHERE heartbeat > now() - interval '10 seconds'`).Scan(&fresh))
	require.Equal(t, 500, fresh)

	for _, c := range claims {
		k.Remove(c.Task)
	}
	require.NoError(t, k.Renew(ctx))
	require.Equal(t, 1, db.queries, "nothing to renew: no statement")
}

func TestLostClaimIsReportedAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	k := heartbeat.New(db, heartbeat.Config{Timeout: time.Minute})
	claims := claim(t, db, 2)
	causes := make(chan error, 2)
	k.Add(claims[0], time.Now(), func(cause error) { causes <- cause })
	k.Add(claims[1], time.Now(), func(cause error) { t.Errorf("kept claim reported lost: %v", cause) })

	// Another executor takes the first task.
	_, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim = gen_random_uuid() WHERE task_id = $1`, claims[0].Task)
	require.NoError(t, err)
	require.NoError(t, k.Renew(ctx))
	require.ErrorIs(t, <-causes, heartbeat.ErrClaimLost)
	require.Equal(t, 1, k.Len(), "a lost claim is no longer renewed")

	// A canceled task's claim is lost too.
	require.NoError(t, tasks.Cancel(ctx, db, claims[1].Task))
	k.Remove(claims[1].Task)
	k.Add(claims[1], time.Now(), func(cause error) { causes <- cause })
	require.NoError(t, k.Renew(ctx))
	require.ErrorIs(t, <-causes, heartbeat.ErrClaimLost)
	require.Zero(t, k.Len())
}

func TestUnrenewableClaimExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := &countingDB{DB: testdb.New(t)}
	k := heartbeat.New(db, heartbeat.Config{Timeout: time.Second})
	claims := claim(t, db.DB, 2)
	causes := make(chan error, 2)
	// One claim was made long ago, the other just now.
	k.Add(claims[0], time.Now().Add(-time.Hour), func(cause error) { causes <- cause })
	k.Add(claims[1], time.Now(), func(cause error) { t.Errorf("young claim expired: %v", cause) })

	db.mu.Lock()
	db.fail = errors.New("connection refused")
	db.mu.Unlock()
	err := k.Renew(ctx)
	require.ErrorContains(t, err, "connection refused")
	require.ErrorIs(t, <-causes, heartbeat.ErrRenewTimeout)
	require.Equal(t, 1, k.Len(), "the young claim is retried next time")

	db.mu.Lock()
	db.fail = nil
	db.mu.Unlock()
	require.NoError(t, k.Renew(ctx))
	require.Equal(t, 1, k.Len())
}

func TestLose(t *testing.T) {
	t.Parallel()
	k := heartbeat.New(&countingDB{}, heartbeat.Config{})
	id := tasks.NewID()
	var got error
	k.Add(heartbeat.Claim{Task: id}, time.Now(), func(cause error) { got = cause })
	require.True(t, k.Lose(id, errors.New("canceled")))
	require.EqualError(t, got, "canceled")
	require.False(t, k.Lose(id, errors.New("again")))
}

func TestRunRenewsUntilCanceled(t *testing.T) {
	t.Parallel()
	db := &countingDB{DB: testdb.New(t)}
	k := heartbeat.New(db, heartbeat.Config{Timeout: 30 * time.Millisecond})
	c := claim(t, db.DB, 1)[0]
	k.Add(c, time.Now(), func(cause error) { t.Errorf("lost: %v", cause) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- k.Run(ctx) }()
	require.Eventually(t, func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		return db.queries >= 3
	}, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}
