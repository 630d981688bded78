package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

// bloatBacklog is how many created but not yet polled tasks the bloat
// feeder keeps at most.
const bloatBacklog = 5_000

// runBloat: N task lifecycles (CreateMany, claim, poll, commit Done,
// deletion by the executor's retention), each carrying Messages messages
// (one more poll for each after the first), with the tables' size and dead
// tuples sampled every SampleEvery.
func runBloat(ctx context.Context, r *runner, res *Result) error {
	o := r.opts
	msgs := max(o.Messages, 0)
	res.param("lifecycles", o.N)
	res.param("messages", msgs)
	res.param("workers", o.Workers)
	res.param("retention", o.Retention)
	res.param("sample_every", o.SampleEvery)
	db, err := r.pool(ctx, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	// The table of messages, on a schema that keeps them out of the task's
	// row (NULL otherwise: its figures are 0).
	var messagesTable bool
	if err := db.QueryRow(ctx, "SELECT to_regclass('corotask.messages') IS NOT NULL").Scan(&messagesTable); err != nil {
		return err
	}
	res.param("messages_table", messagesTable)
	var first firstTime
	var ended atomic.Int64 // lifecycles ended (their last poll returned Done)
	var polls atomic.Int64 // every poll (with messages)
	typ, spec := oneshotType, tasks.Spec{Type: oneshotType}
	if msgs > 0 {
		typ, spec = bloatMsgType, tasks.Spec{Type: bloatMsgType, Message: note{Seq: 0}}
	}
	cfg := r.executorConfig(0)
	cfg.Retention = o.Retention
	cfg.RetentionInterval = time.Second
	grp, err := r.startExecutors(ctx, 1, o.Workers, cfg, func(e *executor.Executor) {
		if msgs > 0 {
			executor.Register(e, typ, bloatMsgPoller(msgs, &ended, &polls), r.typeOptions()...)
		} else {
			executor.Register(e, typ, oneshotPoller(&first, &ended), r.typeOptions()...)
		}
	})
	if err != nil {
		return err
	}
	defer grp.cleanup()

	sample := func(start time.Time) (Fields, error) {
		var table, total, indexes, live, dead, autovacuums, vacuums, rows int64
		err := db.QueryRow(ctx, `SELECT pg_relation_size(relid), pg_total_relation_size(relid), pg_indexes_size(relid),
				n_live_tup, n_dead_tup, autovacuum_count, vacuum_count, (SELECT count(*) FROM corotask.tasks)
			FROM pg_stat_user_tables WHERE relid = 'corotask.tasks'::regclass`).
			Scan(&table, &total, &indexes, &live, &dead, &autovacuums, &vacuums, &rows)
		if err != nil {
			return nil, err
		}
		// The history table, deleted with its tasks by retention.
		var hTotal, hDead, hRows int64
		err = db.QueryRow(ctx, `SELECT pg_total_relation_size(relid), n_dead_tup, (SELECT count(*) FROM corotask.history)
			FROM pg_stat_user_tables WHERE relid = 'corotask.history'::regclass`).Scan(&hTotal, &hDead, &hRows)
		if err != nil {
			return nil, err
		}
		var mTotal, mDead, mRows int64
		if messagesTable {
			err = db.QueryRow(ctx, `SELECT pg_total_relation_size(relid), n_dead_tup, (SELECT count(*) FROM corotask.messages)
				FROM pg_stat_user_tables WHERE relid = 'corotask.messages'::regclass`).Scan(&mTotal, &mDead, &mRows)
			if err != nil {
				return nil, err
			}
		}
		return Fields{
			{"t_sec", time.Since(start).Seconds()},
			{"lifecycles", ended.Load()},
			{"rows", rows},
			{"table_bytes", float64(table)},
			{"indexes_bytes", float64(indexes)},
			{"total_bytes", float64(total)},
			{"dead_tup", dead},
			{"autovacuums", autovacuums},
			{"vacuums", vacuums},
			{"history_rows", hRows},
			{"history_total_bytes", float64(hTotal)},
			{"history_dead_tup", hDead},
			{"messages_rows", mRows},
			{"messages_total_bytes", float64(mTotal)},
			{"messages_dead_tup", mDead},
		}, nil
	}

	r.progress("%d lifecycles, sampling every %s", o.N, o.SampleEvery)
	start := time.Now()
	s0, err := sample(start)
	if err != nil {
		return err
	}
	res.Series = append(res.Series, s0)
	g, gctx := errgroup.WithContext(ctx)
	fed := make(chan struct{})
	g.Go(func() error { // the feeder
		defer close(fed)
		created := 0
		batch := make([]tasks.Spec, 0, o.Batch)
		for created < o.N {
			if created-int(ended.Load()) >= bloatBacklog {
				t := time.NewTimer(5 * time.Millisecond)
				select {
				case <-gctx.Done():
					t.Stop()
					return gctx.Err()
				case <-t.C:
				}
				continue
			}
			batch = batch[:0]
			for range min(o.Batch, o.N-created) {
				batch = append(batch, spec)
			}
			if _, err := tasks.CreateMany(gctx, db, batch); err != nil {
				return err
			}
			created += len(batch)
		}
		return nil
	})
	g.Go(func() error { // the sampler
		t := time.NewTicker(o.SampleEvery)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-t.C:
			}
			s, err := sample(start)
			if err != nil {
				if gctx.Err() != nil {
					return nil
				}
				return err
			}
			res.Series = append(res.Series, s)
			r.progress("%s", fmt.Sprintf("%5.0fs %9d lifecycles, table %s, total %s, %d dead tuples; history %s, %d rows; messages %s, %d rows, %d dead", s.Float("t_sec"),
				ended.Load(), bytesize(s.Float("table_bytes")), bytesize(s.Float("total_bytes")), int64(s.Float("dead_tup")),
				bytesize(s.Float("history_total_bytes")), int64(s.Float("history_rows")),
				bytesize(s.Float("messages_total_bytes")), int64(s.Float("messages_rows")), int64(s.Float("messages_dead_tup"))))
			if ended.Load() >= int64(o.N) {
				return nil
			}
		}
	})
	g.Go(func() error { // the end: all created, polled and committed
		select {
		case <-fed:
		case <-gctx.Done():
			return nil
		}
		return waitUntil(gctx, "every task done", time.Hour, 100*time.Millisecond, func() (bool, error) {
			if ended.Load() < int64(o.N) {
				return false, nil
			}
			left, err := anyLive(gctx, db)
			return !left, err
		})
	})
	err = g.Wait()
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	// Let retention delete the last ones.
	_ = waitUntil(ctx, "retention", o.Retention+10*time.Second, 250*time.Millisecond, func() (bool, error) {
		var n int
		err := db.QueryRow(ctx, "SELECT count(*) FROM corotask.tasks").Scan(&n)
		return n == 0, err
	})
	final, err := sample(start)
	if err != nil {
		return err
	}
	res.Series = append(res.Series, final)
	if err := grp.stop(); err != nil {
		return err
	}

	res.metric("lifecycles", ended.Load())
	res.metric("sec", elapsed.Seconds())
	res.metric("lifecycles_per_sec", rate(int(ended.Load()), elapsed))
	if msgs > 0 {
		res.metric("polls", polls.Load())
	}
	var maxTable, maxTotal, maxDead, maxHistory, maxHistoryRows float64
	var firstHalf, secondHalf, historyFirst, historySecond float64
	var maxMessages, maxMessagesDead, maxMessagesRows, messagesFirst, messagesSecond float64
	n := len(res.Series)
	for i, s := range res.Series {
		maxTable = max(maxTable, s.Float("table_bytes"))
		maxTotal = max(maxTotal, s.Float("total_bytes"))
		maxDead = max(maxDead, s.Float("dead_tup"))
		maxHistory = max(maxHistory, s.Float("history_total_bytes"))
		maxHistoryRows = max(maxHistoryRows, s.Float("history_rows"))
		maxMessages = max(maxMessages, s.Float("messages_total_bytes"))
		maxMessagesDead = max(maxMessagesDead, s.Float("messages_dead_tup"))
		maxMessagesRows = max(maxMessagesRows, s.Float("messages_rows"))
		if i == n-1 {
			continue // after the run
		}
		if i < n/2 {
			firstHalf = max(firstHalf, s.Float("total_bytes"))
			historyFirst = max(historyFirst, s.Float("history_total_bytes"))
			messagesFirst = max(messagesFirst, s.Float("messages_total_bytes"))
		} else {
			secondHalf = max(secondHalf, s.Float("total_bytes"))
			historySecond = max(historySecond, s.Float("history_total_bytes"))
			messagesSecond = max(messagesSecond, s.Float("messages_total_bytes"))
		}
	}
	res.metric("table_bytes_max", maxTable)
	res.metric("total_bytes_max", maxTotal)
	res.metric("total_bytes_final", final.Float("total_bytes"))
	res.metric("dead_tup_max", maxDead)
	res.metric("autovacuums", final.Get("autovacuums"))
	res.metric("vacuums", final.Get("vacuums"))
	if growth, verdict, ok := sizeVerdict(firstHalf, secondHalf); ok {
		res.metric("growth_second_half_vs_first", growth)
		res.note("size: %s (the largest total size in the second half of the run is %.2fx that of the first half)", verdict, growth)
	}
	res.metric("history_total_bytes_max", maxHistory)
	res.metric("history_rows_max", maxHistoryRows)
	res.metric("history_total_bytes_final", final.Float("history_total_bytes"))
	res.metric("history_rows_final", final.Float("history_rows"))
	if growth, verdict, ok := sizeVerdict(historyFirst, historySecond); ok {
		res.metric("history_growth_second_half_vs_first", growth)
		res.note("history size: %s (%.2fx from the first half of the run to the second); retention deletes a task's history with it", verdict, growth)
	}
	res.metric("messages_total_bytes_max", maxMessages)
	res.metric("messages_rows_max", maxMessagesRows)
	res.metric("messages_dead_tup_max", maxMessagesDead)
	res.metric("messages_total_bytes_final", final.Float("messages_total_bytes"))
	res.metric("messages_rows_final", final.Float("messages_rows"))
	if growth, verdict, ok := sizeVerdict(messagesFirst, messagesSecond); ok {
		res.metric("messages_growth_second_half_vs_first", growth)
		res.note("messages table size: %s (%.2fx from the first half of the run to the second)", verdict, growth)
	}
	if msgs > 0 {
		res.note("each lifecycle carries %d messages: the task is created with the first; each poll pops what it is shown, sends the task the next (Task.Send to itself) and suspends, until the poll that has popped %d ends it", msgs, msgs)
	}
	if !messagesTable {
		res.note("no table corotask.messages on this schema (messages are kept in the task's row): messages_* are 0")
	}
	res.note("retention deletes ended tasks after -retention, every second; total_bytes is the table, its indexes and TOAST; vacuums are VACUUMs not run by autovacuum (e.g. the executor's own, when the server's autovacuum is off)")
	return nil
}

const bloatMsgType tasks.Type = "bench.bloat.msg"

// bloatMsgState is what a bloat task with messages counts.
type bloatMsgState struct {
	Got int `json:"got,omitempty"`
}

// bloatMsgPoller pops every message it is shown; until it has had msgs, it
// sends its task the next one and suspends (the commit that suspends it
// delivers the message, which wakes it again); then it ends the task,
// counting the lifecycle in ended. polls counts every poll.
func bloatMsgPoller(msgs int, ended, polls *atomic.Int64) executor.PollerFunc[bloatMsgState, note] {
	return func(ctx context.Context, t *executor.Task[bloatMsgState, note]) (executor.Action, error) {
		polls.Add(1)
		popped := 0
		for {
			if _, ok := t.Inbox.Pop(); !ok {
				break
			}
			popped++
		}
		t.State.Got += popped
		if t.State.Got >= msgs {
			ended.Add(1)
			return executor.Done(), nil
		}
		if popped > 0 { // a poll with none (woken otherwise) waits for the one already sent
			t.Send(t.ID, note{Seq: t.State.Got})
		}
		return executor.Suspend(), nil
	}
}

// sizeVerdict compares a table's largest size in the second half of a run
// with that in the first: "GROWING" past 1.5x, else "bounded". ok is false
// when the first half has no size to compare with.
func sizeVerdict(firstHalf, secondHalf float64) (growth float64, verdict string, ok bool) {
	if firstHalf <= 0 {
		return 0, "", false
	}
	growth = secondHalf / firstHalf
	if growth > 1.5 {
		return growth, "GROWING", true
	}
	return growth, "bounded", true
}
