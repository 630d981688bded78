package heartbeat_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/heartbeat"
	"github.com/corotask/corotask/internal/cause"
	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// shardFailingDB fails the renewals (query.RenewShard) of one shard.
type shardFailingDB struct {
	tasks.DB
	shard int64
}

var errShardDown = errors.New("this shard's worker is down")

func (s *shardFailingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if sql == query.RenewShard {
		var shard int64
		if err := s.DB.QueryRow(ctx, `SELECT get_shard_id_for_distribution_column('corotask.tasks', $1::uuid)`, args[0]).Scan(&shard); err != nil {
			return nil, err
		}
		if shard == s.shard {
			return nil, errShardDown
		}
	}
	return s.DB.Query(ctx, sql, args...)
}

// On Citus a renewal runs shard by shard: when one shard's fails, the
// claims of every other shard are renewed all the same, and only the
// failing shard's claims, due (their last renewal a timeout ago), are lost.
func TestCitusRenewalFailingOnOneShardKeepsTheOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Citus(t)
	const n = 16
	specs := make([]tasks.Spec, n)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "job"}
	}
	ids, err := tasks.CreateMany(ctx, db, specs)
	require.NoError(t, err)
	shards := map[tasks.ID]int64{}
	claims := make([]heartbeat.Claim, n)
	for i, id := range ids {
		token := tasks.NewID()
		_, err := db.Exec(ctx, `UPDATE corotask.tasks SET claim = $2, heartbeat = $3, claim_expires_at = $3
			WHERE task_id = $1 AND root_id = $1`, id, token.UUID(), time.Now().Add(time.Minute))
		require.NoError(t, err)
		var shard int64
		require.NoError(t, db.QueryRow(ctx, `SELECT get_shard_id_for_distribution_column('corotask.tasks', $1::uuid)`,
			id).Scan(&shard))
		shards[id] = shard
		claims[i] = heartbeat.Claim{Task: id, Token: token}
	}
	failing := shards[ids[0]]
	var kept int
	for _, s := range shards {
		if s != failing {
			kept++
		}
	}
	require.Positive(t, kept, "the tasks lie on more than one shard")

	k := heartbeat.New(&shardFailingDB{DB: db, shard: failing}, heartbeat.Config{Timeout: time.Hour})
	k.SetDistributed(true)
	var mu sync.Mutex
	lost := map[tasks.ID]error{}
	for _, c := range claims {
		// Last renewed a timeout ago: a claim this renewal misses is lost.
		k.Add(c, time.Now().Add(-2*time.Hour), func(why error) {
			mu.Lock()
			defer mu.Unlock()
			lost[c.Task] = why
		})
	}
	require.ErrorIs(t, k.Renew(ctx), errShardDown)
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if shards[id] == failing {
			require.ErrorIs(t, lost[id], cause.RenewTimeout, "task %s on the failing shard", id)
		} else {
			require.NotContains(t, lost, id, "task %s on a shard that renewed", id)
		}
	}
	require.Equal(t, n-kept, len(lost))
}
