package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMeasureOverlap(t *testing.T) {
	t.Parallel()
	require.Equal(t, overlap{}, measureOverlap(nil))
	// Two processes' intervals, merged: [0,10] [5,15] [8,9] overlap at 8..9
	// (3 open); [15,20] starts as [5,15] ends (no overlap).
	o := measureOverlap([]int64{0, 10, 15, 20, 5, 15, 8, 9})
	require.Equal(t, 3, o.max)
	require.Equal(t, 4, o.intervals)
	require.InDelta(t, float64(10+5+10+1)/20, o.mean, 1e-9)
	// Back to back: never more than one.
	require.Equal(t, 1, measureOverlap([]int64{0, 1, 1, 2, 2, 3}).max)
	// The same interval twice: two.
	require.Equal(t, 2, measureOverlap([]int64{4, 7, 4, 7}).max)
}

func TestPollSpans(t *testing.T) {
	t.Parallel()
	var p pollSpans
	t0 := time.Unix(0, 100)
	p.add(t0, t0.Add(5))
	p.add(t0.Add(2), t0.Add(3))
	require.Equal(t, []int64{100, 105, 102, 103}, p.flat())
	require.Equal(t, 2, measureOverlap(p.flat()).max)
}
