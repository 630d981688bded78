package humantime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		250 * time.Millisecond:                    "250ms",
		5 * time.Second:                           "5s",
		3*time.Minute + 10*time.Second:            "3m10s",
		2 * time.Hour:                             "2h",
		2*time.Hour + 5*time.Minute + time.Second: "2h5m",
		3*24*time.Hour + 4*time.Hour:              "3d4h",
	} {
		require.Equal(t, want, Duration(d), "%v", d)
	}
}

func TestRelative(t *testing.T) {
	t.Parallel()
	now := time.Now()
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	require.Equal(t, "in 5s", Relative(at(5*time.Second), now))
	require.Equal(t, "3m10s ago", Relative(at(-3*time.Minute-10*time.Second), now))
	require.Equal(t, "now", Relative(at(300*time.Millisecond), now))
	require.Equal(t, "", Relative(nil, now))
	require.Equal(t, "", Relative(&time.Time{}, now))
}
