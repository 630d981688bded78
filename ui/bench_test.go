package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
	"github.com/corotask/corotask/ui"
)

// BenchmarkPages measures the time of each page on a table of 1M tasks
// ($COROTASK_UI_BENCH_ROWS to change it): 90% done, 2% failed, 1% canceled,
// the rest live (sleeping, suspended, ready, some of them failing), of 8
// types, and one workflow of 1000 children. Filling the table takes a
// minute or so; it is not counted.
//
//	go test ./ui -run '^$' -bench Pages -benchtime 20x
func BenchmarkPages(b *testing.B) {
	rows := 1_000_000
	if s := os.Getenv("COROTASK_UI_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("COROTASK_UI_BENCH_ROWS: %v", err)
		}
		rows = n
	}
	pool := testdb.New(b)
	parent, leaf := fill(b, pool, rows)
	h, err := ui.New(ui.Config{Pool: pool})
	if err != nil {
		b.Fatal(err)
	}
	mid := tasks.NewID() // a cursor in the middle of the table
	if err := pool.QueryRow(context.Background(), `SELECT task_id FROM corotask.tasks ORDER BY task_id OFFSET $1 LIMIT 1`, rows/2).Scan(&mid); err != nil {
		b.Fatal(err)
	}
	for _, p := range []struct{ name, path string }{
		{"overview", "/"},
		{"tasks", "/tasks"},
		{"tasks/next-page", "/tasks?after=" + mid.String()},
		{"tasks/oldest-first", "/tasks?sort=oldest"},
		{"tasks/type", "/tasks?type=type3"},
		{"tasks/status-ready", "/tasks?status=ready"},
		{"tasks/status-failed", "/tasks?status=failed"},
		{"tasks/status-suspended", "/tasks?status=suspended"},
		{"tasks/type-and-status", "/tasks?type=type5&status=done"},
		{"tasks/failing", "/tasks?failing=1"},
		{"tasks/last-10m", "/tasks?since=10m"},
		{"tasks/parent", "/tasks?parent=" + parent.String()},
		{"task/1000-children", "/tasks/" + parent.String()},
		{"task/leaf", "/tasks/" + leaf.String()},
		{"tree/1001-tasks", "/tasks/" + parent.String() + "/tree"},
	} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.path, nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p.path, rec.Code, rec.Body.String())
				}
			}
		})
	}
}

// fill inserts n tasks (IDs made from their creation times, over the last
// two hours, as ULIDs are) and returns a parent of 1000 children and one of
// them.
func fill(b *testing.B, pool *pgxpool.Pool, n int) (parent, leaf tasks.ID) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	const batch = 100_000
	for from := 0; from < n; from += batch {
		_, err := pool.Exec(ctx, `
			INSERT INTO corotask.tasks (task_id, root_id, task_type, inner_state, wake_at, failures, last_error,
				created_at, done_at, outcome, result)
			SELECT id, id,
			       'type' || (i % 8),
			       jsonb_build_object('n', i, 'items', jsonb_build_array('tea', 'milk')),
			       CASE WHEN k < 93 THEN NULL
			            WHEN k < 96 THEN now() + interval '1 hour'
			            WHEN k < 98 THEN NULL
			            ELSE c END,
			       CASE WHEN k = 99 AND i % 7 = 0 THEN 3 WHEN k BETWEEN 90 AND 91 THEN 5 ELSE 0 END,
			       CASE WHEN (k = 99 AND i % 7 = 0) OR k BETWEEN 90 AND 91 THEN 'boom: connection refused' END,
			       c,
			       CASE WHEN k < 93 THEN c + interval '2 seconds' END,
			       CASE WHEN k < 90 THEN 'done' WHEN k < 92 THEN 'failed' WHEN k < 93 THEN 'canceled' END,
			       CASE WHEN k < 90 THEN '{"ok": true}'::jsonb END
			FROM (SELECT i, i % 100 AS k, now() - interval '2 hours' + (i::float8 / $3) * interval '2 hours' AS c
			      FROM generate_series($1::int, $2::int - 1) i) s,
			     LATERAL (SELECT (lpad(to_hex((extract(epoch FROM c) * 1000)::bigint), 12, '0')
			                      || substr(md5(i::text), 1, 20))::uuid AS id) d`, from, min(from+batch, n), n)
		if err != nil {
			b.Fatalf("fill: %v", err)
		}
	}
	parent = tasks.NewID()
	if _, err := tasks.Create(ctx, pool, tasks.Spec{ID: parent, Type: "workflow"}); err != nil {
		b.Fatal(err)
	}
	specs := make([]tasks.Spec, 1000)
	for i := range specs {
		specs[i] = tasks.Spec{Type: "step", Parent: parent, WakeAt: time.Now().Add(time.Hour)}
	}
	ids, err := tasks.CreateMany(ctx, pool, specs)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE corotask.tasks"); err != nil {
		b.Fatal(err)
	}
	b.Logf("filled %d tasks in %v", n, time.Since(start).Round(time.Second))
	return parent, ids[0]
}
