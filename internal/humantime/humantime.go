// Package humantime prints times and durations for people, the same way in
// the CLI and the web UI: "in 5s", "3m10s ago", "2h5m".
package humantime

import (
	"fmt"
	"time"
)

// Duration prints d (positive) with at most two units: "250ms", "5s",
// "3m10s", "2h5m", "3d4h".
func Duration(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	case d < time.Minute:
		return fmt.Sprintf("%ds", d/time.Second)
	case d < time.Hour:
		return twoUnits(d, time.Minute, "m", time.Second, "s")
	case d < day:
		return twoUnits(d, time.Hour, "h", time.Minute, "m")
	default:
		return twoUnits(d, day, "d", time.Hour, "h")
	}
}

func twoUnits(d, big time.Duration, bigName string, small time.Duration, smallName string) string {
	n, rest := d/big, (d%big)/small
	if rest == 0 {
		return fmt.Sprintf("%d%s", n, bigName)
	}
	return fmt.Sprintf("%d%s%d%s", n, bigName, rest, smallName)
}

// Relative describes t relative to now: "in 5s", "3m10s ago", "now" within
// a second; "" for nil or the zero time.
func Relative(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	d := t.Sub(now)
	switch {
	case d >= time.Second:
		return "in " + Duration(d)
	case d <= -time.Second:
		return Duration(-d) + " ago"
	default:
		return "now"
	}
}
