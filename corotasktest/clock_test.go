package corotasktest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/corotasktest"
)

func TestClockStartsNowAndMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	before := time.Now().Truncate(time.Microsecond)
	c := corotasktest.NewClock()
	after := time.Now()
	start := c.Now()
	require.False(t, start.Before(before))
	require.False(t, start.After(after))
	require.Equal(t, start.Truncate(time.Microsecond), start, "to the microsecond")
	require.Equal(t, start.Round(0), start, "no monotonic reading")
	require.Equal(t, start, c.Now(), "it stands still")

	require.Equal(t, start.Add(time.Hour), c.Advance(time.Hour))
	require.Equal(t, start.Add(time.Hour), c.Now())
	require.Equal(t, start.Add(time.Hour), c.Advance(0))

	later := start.Add(48 * time.Hour)
	c.Set(later)
	require.Equal(t, later, c.Now())
	c.Set(later) // the same time is no step back
	require.Equal(t, later, c.Now())
}

func TestClockNeverGoesBack(t *testing.T) {
	t.Parallel()
	c := corotasktest.NewClock()
	start := c.Now()
	require.PanicsWithValue(t, "corotasktest: Clock.Advance(-1s): the clock never goes back", func() { c.Advance(-time.Second) })
	require.Panics(t, func() { c.Set(start.Add(-time.Nanosecond)) })
	require.Equal(t, start, c.Now())
}

func TestClockConcurrentUse(t *testing.T) {
	t.Parallel()
	c := corotasktest.NewClock()
	start := c.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				prev := c.Now()
				if c.Advance(time.Millisecond).Before(prev) {
					t.Error("the clock went back")
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, start.Add(800*time.Millisecond), c.Now())
}
