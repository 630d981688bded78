package bench

import (
	"flag"
	"io"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
)

// checkFlowSmoke checks the figures of the flow control scenarios, run at
// the tiny sizes of TestScenariosSmoke.
func checkFlowSmoke(t *testing.T, name string, rec record) {
	t.Helper()
	m := rec.Metrics
	switch name {
	case "limit":
		require.Equal(t, "processes", rec.Params["mode"])
		require.Equal(t, true, rec.Params["binding"])
		require.Equal(t, 3.0, rec.Params["max_running"])
		require.Positive(t, m["unlimited_tasks_per_sec"])
		require.Positive(t, m["limited_tasks_per_sec"])
		require.Positive(t, m["limited_vs_unlimited"])
		// Run fails above the limit; at least one poll ran, and no more
		// than the executors' slots at once without it.
		require.GreaterOrEqual(t, m["max_overlap_limited"], 1.0)
		require.LessOrEqual(t, m["max_overlap_limited"], 3.0)
		require.Zero(t, m["limit_exceeded_by"])
		require.GreaterOrEqual(t, m["max_overlap_unlimited"], 1.0)
		require.LessOrEqual(t, m["max_overlap_unlimited"], 8.0)
		require.LessOrEqual(t, m["mean_running_limited"], m["max_overlap_limited"])
		require.Len(t, rec.Series, 2, "one round of each variant")
		require.Equal(t, "unlimited", rec.Series[0]["variant"])
		require.Equal(t, "limited", rec.Series[1]["variant"])
		for _, s := range rec.Series {
			require.Equal(t, 300.0, s["polls"], "each task polled once")
		}
	case "priority":
		for _, phase := range []string{"empty", "backlog"} {
			require.Positive(t, m[phase+"_p50_ms"], phase)
			require.LessOrEqual(t, m[phase+"_p50_ms"], m[phase+"_p95_ms"], phase)
			require.LessOrEqual(t, m[phase+"_p95_ms"], m[phase+"_p99_ms"], phase)
			// The parts: the claim that took the task found, and each part
			// within the latencies. (The wait may be below zero: a claim
			// sent as the create's COMMIT was may still see the task.)
			for _, part := range []string{"_claim_p50_ms", "_start_p50_ms"} {
				require.Positive(t, m[phase+part], phase+part)
				require.LessOrEqual(t, m[phase+part], m[phase+"_p99_ms"], phase+part)
			}
			require.Less(t, math.Abs(m[phase+"_wait_p50_ms"]), m[phase+"_p99_ms"], phase)
		}
		require.InDelta(t, m["backlog_p50_ms"]/m["empty_p50_ms"], m["backlog_vs_empty_p50"], 0.01*m["backlog_vs_empty_p50"])
		require.Positive(t, m["backlog_min"], "the backlog never ran out")
		require.Positive(t, m["backlog_left"])
		require.Positive(t, m["backlog_polls_per_sec"])
		require.Equal(t, 10.0, rec.Params["priority"])
		require.Equal(t, 2.0, rec.Params["priority_slots"])
		require.Positive(t, m["priority_lane_tasks"], "the priority slots took tasks")
		require.LessOrEqual(t, m["priority_lane_tasks"], 20.0)
	case "keylimit":
		for _, k := range []string{"no_keys_tasks_per_sec", "keys_tasks_per_sec", "no_keys_claim_ms", "keys_claim_ms",
			"keys_vs_no_keys_claim_ms", "keys_vs_no_keys_tasks_per_sec"} {
			require.Positive(t, m[k], k)
		}
		require.Len(t, rec.Series, 2)
		require.Equal(t, "no_keys", rec.Series[0]["variant"])
		require.Equal(t, 0.0, rec.Series[0]["keys"], "no task has a key")
		require.Equal(t, "keys", rec.Series[1]["variant"])
		require.Positive(t, rec.Series[1]["keys"])
		require.LessOrEqual(t, rec.Series[1]["keys"], 50.0)
		for _, s := range rec.Series {
			require.GreaterOrEqual(t, s["claim_all_ms"], 0.0)
			require.GreaterOrEqual(t, s["tasks_per_claim"], 1.0)
		}
	}
}

// The limit not binding (above -workers), its executors in this process:
// no poll ran above the slots.
func TestLimitNotBindingInProcess(t *testing.T) {
	t.Parallel()
	rec := runScenario(t, Options{DatabaseURL: testdb.AdminURL(t), Scenario: "limit", N: 200, Workers: 6, Executors: 2,
		InProcess: true, Pool: 4, Batch: 100, Rounds: 2})
	require.Equal(t, "in-process", rec.Params["mode"])
	require.Equal(t, false, rec.Params["binding"])
	require.Equal(t, 64.0, rec.Params["max_running"])
	require.Len(t, rec.Series, 4, "unlimited, limited, unlimited, limited")
	require.Equal(t, "limited", rec.Series[3]["variant"])
	require.LessOrEqual(t, rec.Metrics["max_overlap_limited"], 6.0)
	require.LessOrEqual(t, rec.Metrics["max_overlap_unlimited"], 6.0)
}

// A result whose polls ran above the limit fails its check, naming both.
func TestCheckLimit(t *testing.T) {
	t.Parallel()
	var res Result
	res.param("max_running", 5)
	res.metric("max_overlap_limited", 5)
	require.NoError(t, checkLimit(&res))
	res.metric("max_overlap_limited", 6)
	require.ErrorContains(t, checkLimit(&res), "6 polls ran at once with max_running 5")
}

func TestMedian(t *testing.T) {
	t.Parallel()
	require.True(t, math.IsNaN(median(nil)))
	require.Equal(t, 2.0, median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
}

func TestFlowFlags(t *testing.T) {
	t.Parallel()
	var o Options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"-rounds", "4", "-max-running", "5", "-poll-time", "3ms", "-backlog", "500",
		"-limit-keys", "70", "-key-max", "2"}))
	require.Equal(t, Options{Rounds: 4, MaxRunning: 5, PollTime: 3 * time.Millisecond, Backlog: 500, LimitKeys: 70, KeyMax: 2}, o)
	l := Options{}.withDefaults("limit")
	require.Equal(t, 20_000, l.N)
	require.Equal(t, 32, l.Workers)
	require.Equal(t, 2, l.Executors)
	require.Equal(t, 64, l.MaxRunning)
	require.Equal(t, 3, l.Rounds)
	require.Equal(t, time.Millisecond, l.PollTime)
	p := Options{}.withDefaults("priority")
	require.Equal(t, 200, p.N)
	require.Equal(t, 20*time.Millisecond, p.Gap)
	require.Equal(t, 100_000, p.Backlog)
	k := Options{}.withDefaults("keylimit")
	require.Equal(t, 50_000, k.N)
	require.Equal(t, 2, k.Rounds)
	require.Equal(t, 10_000, k.LimitKeys)
	require.Equal(t, 1, k.KeyMax)
	err := Run(t.Context(), Options{Scenario: "limit", MaxRunning: -1}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "-max-running must not be negative")
	err = Run(t.Context(), Options{Scenario: "limit", PollTime: -time.Millisecond}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "-poll-time must not be negative")
}
