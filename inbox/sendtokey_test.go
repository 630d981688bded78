package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// bodies returns the bodies of a task's inbox, in order.
func bodies(t *testing.T, task *tasks.Task) []string {
	t.Helper()
	var out []string
	for _, m := range append(task.Inbox, task.InboxNext...) {
		var env struct{ Body json.RawMessage }
		require.NoError(t, json.Unmarshal(m, &env))
		out = append(out, string(env.Body))
	}
	return out
}

func TestSendToKeyCreatesThenSends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)

	id, err := inbox.SendToKey(ctx, db, "cart", "user-7", "add apple", map[string]int{"items": 0})
	require.NoError(t, err)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Equal(t, "user-7", task.Key)
	require.Equal(t, tasks.Type("cart"), task.Type)
	require.Equal(t, tasks.StatusReady, task.Status)
	require.JSONEq(t, `{"items":0}`, string(task.State))
	require.Equal(t, []string{`"add apple"`}, bodies(t, task))
	require.Equal(t, tasks.ID{}, task.Parent)

	// The live task with the key gets the next message; the state passed
	// is for a task created, and is ignored here.
	again, err := inbox.SendToKey(ctx, db, "cart", "user-7", "add pear", map[string]int{"items": 99})
	require.NoError(t, err)
	require.Equal(t, id, again)
	task, err = tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.JSONEq(t, `{"items":0}`, string(task.State))
	require.Equal(t, []string{`"add apple"`, `"add pear"`}, bodies(t, task))

	// A task with the key created otherwise is found as well.
	other, err := tasks.Create(ctx, db, tasks.Spec{Type: "cart", Key: "user-8"})
	require.NoError(t, err)
	got, err := inbox.SendToKey(ctx, db, "cart", "user-8", "hi", nil)
	require.NoError(t, err)
	require.Equal(t, other, got)

	// Once the task has ended, the key names a new one.
	require.NoError(t, tasks.Cancel(ctx, db, id))
	fresh, err := inbox.SendToKey(ctx, db, "cart", "user-7", "add plum", nil)
	require.NoError(t, err)
	require.NotEqual(t, id, fresh)
	task, err = tasks.Get(ctx, db, fresh)
	require.NoError(t, err)
	require.Nil(t, task.State, "the poller's zero value")
	require.Equal(t, []string{`"add plum"`}, bodies(t, task))
	// Its ID, made in SQL, is a ULID of the time it was created.
	require.False(t, fresh.Time().Before(task.CreatedAt.Truncate(time.Millisecond)))
	require.False(t, fresh.Time().After(time.Now()))
}

func TestSendToKeyRefusesInvalidInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	for _, c := range []struct {
		typ       tasks.Type
		key, want string
	}{
		{"cart", "", "invalid task key: empty"},
		{"cart", strings.Repeat("k", 201), "201 bytes, at most 200"},
		{"cart", "a\tb", `invalid task key "a\tb": control character U+0009`},
		{"", "k", "invalid task type: empty"},
	} {
		_, err := inbox.SendToKey(ctx, db, c.typ, c.key, "m", nil)
		require.ErrorContains(t, err, c.want, "%q %q", c.typ, c.key)
	}
	_, err := inbox.SendToKey(ctx, db, "cart", "k", strings.Repeat("x", tasks.MaxMessageBytes+1), nil)
	require.ErrorIs(t, err, tasks.ErrTooLarge)

	// The SQL function checks the same, for callers in SQL.
	for key, want := range map[string]string{
		"":       "invalid task key of task",
		"a\x01b": `invalid task key "a?b" of task`,
		"日本\x1f": "control character U+001F at character 3",
	} {
		_, err := db.Exec(ctx, `SELECT corotask.send_to_key('cart', $1, '"m"')`, key)
		require.ErrorContains(t, err, want, "%q", key)
	}
	_, err = db.Exec(ctx, `SELECT corotask.send_to_key('cart', NULL, '"m"')`)
	require.ErrorContains(t, err, "send_to_key needs a key")
	_, err = db.Exec(ctx, `SELECT corotask.send_to_key(' cart', 'k', '"m"')`)
	require.ErrorContains(t, err, "leading or trailing space")
}

// Senders racing on a new key create one task, which gets every message.
func TestSendToKeyRaceCreatesOneTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const senders = 16
	// A connection for each sender, whose transactions overlap.
	db := testdb.PoolOfSize(t, testdb.URL(t), senders+1)
	var ready, wg sync.WaitGroup
	ready.Add(senders)
	release := make(chan struct{})
	ids := make([]tasks.ID, senders)
	errs := make([]error, senders)
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
				// Each sender holds a transaction of its own before the race.
				if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
					return err
				}
				ready.Done()
				<-release
				var err error
				ids[i], err = inbox.SendToKey(ctx, tx, "counter", "shared", i, nil)
				return err
			})
		}()
	}
	ready.Wait()
	close(release)
	wg.Wait()
	for i := range senders {
		require.NoError(t, errs[i])
		require.Equal(t, ids[0], ids[i])
	}
	list, err := tasks.List(ctx, db, tasks.Filter{Type: "counter"})
	require.NoError(t, err)
	require.Len(t, list, 1)
	task, err := tasks.Get(ctx, db, ids[0])
	require.NoError(t, err)
	got := bodies(t, task)
	require.Len(t, got, senders)
	require.ElementsMatch(t, func() []string {
		var want []string
		for i := range senders {
			want = append(want, fmt.Sprint(i))
		}
		return want
	}(), got)
	require.Equal(t, senders, task.InboxLen)
}

// A sender whose key another transaction is creating waits for it: when
// that one commits, the message goes to its task; when it rolls back, the
// waiting sender creates the task itself.
func TestSendToKeyWaitsForAConcurrentCreation(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t)
			first, err := db.Begin(ctx)
			require.NoError(t, err)
			defer first.Rollback(ctx)
			created, err := inbox.SendToKey(ctx, first, "counter", "k", "first", nil)
			require.NoError(t, err)

			type result struct {
				id  tasks.ID
				err error
			}
			second := make(chan result, 1)
			go func() {
				id, err := inbox.SendToKey(ctx, db, "counter", "k", "second", nil)
				second <- result{id, err}
			}()
			testdb.WaitForLockWait(t, db)
			if commit {
				require.NoError(t, first.Commit(ctx))
			} else {
				require.NoError(t, first.Rollback(ctx))
			}
			r := <-second
			require.NoError(t, r.err)
			task, err := tasks.GetByKey(ctx, db, "counter", "k")
			require.NoError(t, err)
			require.Equal(t, r.id, task.ID)
			if commit {
				require.Equal(t, created, r.id)
				require.Equal(t, []string{`"first"`, `"second"`}, bodies(t, task))
			} else {
				require.NotEqual(t, created, r.id)
				require.Equal(t, []string{`"second"`}, bodies(t, task))
			}
		})
	}
}

// Row changes become messages: a trigger sends each change of a row to the
// task of the row's key, created by the first.
func TestSendToKeyFromATrigger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	_, err := db.Exec(ctx, `
		CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL);
		CREATE FUNCTION orders_changed() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM corotask.send_to_key('order.watch', NEW.id,
				jsonb_build_object('status', NEW.status),
				jsonb_build_object('order', NEW.id));
			RETURN NULL;
		END
		$$;
		CREATE TRIGGER orders_changed AFTER INSERT OR UPDATE OF status ON orders
			FOR EACH ROW EXECUTE FUNCTION orders_changed();`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO orders VALUES ('o-1', 'new'), ('o-2', 'new')`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE orders SET status = 'paid' WHERE id = 'o-1'`)
	require.NoError(t, err)
	// A change rolled back sends nothing.
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE orders SET status = 'lost' WHERE id = 'o-2'`)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))

	one, err := tasks.GetByKey(ctx, db, "order.watch", "o-1")
	require.NoError(t, err)
	require.JSONEq(t, `{"order":"o-1"}`, string(one.State))
	require.Equal(t, []string{`{"status": "new"}`, `{"status": "paid"}`}, bodies(t, one))
	two, err := tasks.GetByKey(ctx, db, "order.watch", "o-2")
	require.NoError(t, err)
	require.Equal(t, []string{`{"status": "new"}`}, bodies(t, two))
}

// A message sent while the key's task ends goes to a new task with that key.
func TestSendToKeyWhileItsTaskEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	old, err := inbox.SendToKey(ctx, db, "counter", "k", "first", nil)
	require.NoError(t, err)
	ending, err := db.Begin(ctx)
	require.NoError(t, err)
	defer ending.Rollback(ctx)
	require.NoError(t, tasks.Cancel(ctx, ending, old))

	type result struct {
		id  tasks.ID
		err error
	}
	sent := make(chan result, 1)
	go func() {
		id, err := inbox.SendToKey(ctx, db, "counter", "k", "second", nil)
		sent <- result{id, err}
	}()
	testdb.WaitForLockWait(t, db) // on the task's row, which the cancel holds
	require.NoError(t, ending.Commit(ctx))
	r := <-sent
	require.NoError(t, r.err)
	require.NotEqual(t, old, r.id)
	task, err := tasks.GetByKey(ctx, db, "counter", "k")
	require.NoError(t, err)
	require.Equal(t, r.id, task.ID)
	require.Equal(t, []string{`"second"`}, bodies(t, task))
}
