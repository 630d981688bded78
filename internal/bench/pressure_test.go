package bench

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
)

// Each mode of the pressure scenario, briefly and at a low rate: what was
// created is what the producer committed, once each, and every task is
// done or counted lost. It asserts nothing about speed.
func TestPressureModes(t *testing.T) {
	t.Parallel()
	base := Options{Scenario: "pressure", Rate: 100, Warmup: time.Second, Duration: 2 * time.Second, After: time.Second,
		Workers: 8, Pool: 4}
	modes := map[string]func(o *Options){
		"none":         func(o *Options) {},
		"killbackends": func(o *Options) { o.KillRate = 5 },
		"idletx":       func(o *Options) {},
		"readers":      func(o *Options) { o.Readers = 2 },
		"stop":         func(o *Options) { o.Stops = 1 },
	}
	for _, mode := range pressureModes {
		set, ok := modes[mode]
		require.True(t, ok, "a test of every mode")
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			o := base
			o.DatabaseURL, o.Mode = testdb.AdminURL(t), mode
			set(&o)
			rec := runScenario(t, o)
			m := rec.Metrics
			require.Equal(t, mode, rec.Params["mode"])
			require.Positive(t, m["created"])
			require.Equal(t, m["created_by_producer"], m["created"], "the table has what the producer committed")
			require.Zero(t, m["created_missing"])
			require.Zero(t, m["created_twice"])
			require.Equal(t, m["created"], m["done"]+m["lost"])
			require.GreaterOrEqual(t, m["polls"], m["done"], "every task done was polled")
			require.GreaterOrEqual(t, m["backlog_peak"], 0.0)
			for _, k := range []string{"offered_per_sec", "done_per_sec_during", "pickup_p50_ms", "pickup_p99_ms",
				"pickup_p50_ms_before", "pickup_p99_ms_after", "backlog_before", "recovery_sec", "repolled", "executor_log_warnings"} {
				require.Contains(t, m, k)
			}
			require.NotEmpty(t, rec.Series)
			require.Contains(t, rec.Series[0], "done")
			switch mode {
			case "none":
				require.Zero(t, m["lost"])
				require.Zero(t, m["worker_errors"])
			case "killbackends":
				require.GreaterOrEqual(t, m["kill_rounds"], 1.0, "a round at the start of the pressure")
				require.GreaterOrEqual(t, m["backends_killed"], 1.0, "the executor's sessions at least")
			case "idletx":
				require.Contains(t, m, "idle_tx_held_sec")
			case "readers":
				require.Contains(t, m, "reader_scans")
			case "stop":
				require.Equal(t, 1.0, m["stops"])
				require.GreaterOrEqual(t, m["left_claimed"], 0.0)
				require.Equal(t, 2.0, rec.Params["executors"], "two worker processes by default")
			}
		})
	}
}

func TestPressureRefusesBadModes(t *testing.T) {
	t.Parallel()
	err := Run(t.Context(), Options{Scenario: "pressure", Mode: "nope"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "-mode must be one of none, killbackends")
	err = Run(t.Context(), Options{Scenario: "pressure", Mode: "stop", Executors: 1}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "needs -executors 2 or more")
	err = Run(t.Context(), Options{Scenario: "pressure", Mode: "stop", InProcess: true}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "not -in-process")
}

// The recovery rule: the first sample after the pressure from which the
// backlog stays at or under its level before for recoveryHold.
func TestPressureRecovery(t *testing.T) {
	t.Parallel()
	release := time.Unix(1000, 0)
	at := func(ms int, n int64) backlogSample {
		return backlogSample{at: release.Add(time.Duration(ms) * time.Millisecond), n: n}
	}
	samples := []backlogSample{at(-250, 3), at(0, 50), at(250, 9), at(500, 4), at(750, 12), at(1000, 5), at(1250, 5),
		at(1500, 2), at(1750, 5), at(2000, 4), at(2250, 1)}
	d, ok := recovery(samples, release, 5)
	require.True(t, ok)
	require.Equal(t, 1000*time.Millisecond, d, "500ms dips under, but 750ms goes over again")
	_, ok = recovery(samples, release, 0)
	require.False(t, ok, "never down to 0")
	d, ok = recovery(samples, release, 100)
	require.True(t, ok)
	require.Zero(t, d, "never above the level")
	d, ok = recovery(samples[:8], release, 2)
	require.True(t, ok, "the last samples count when fewer remain than recoveryHold")
	require.Equal(t, 1500*time.Millisecond, d)
}
