package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cron is a parsed schedule expression in a time zone: its Next gives the
// slots, the times at which the schedule runs.
//
// It is standard 5-field cron (minute hour day-of-month month day-of-week),
// each field "*", a value, a range "a-b", a step "*/n" or "a-b/n", or a
// comma-separated list of those; months may be named JAN-DEC and days
// SUN-SAT (0 and 7 are both Sunday). When both day-of-month and day-of-week
// are restricted (neither starts with "*"), a day matches when either does,
// as in classic cron. The shorthands @hourly, @daily (@midnight), @weekly,
// @monthly and @yearly (@annually) stand for their usual expressions, and
// "@every D" (time.ParseDuration, at least 1s) runs at every multiple of D
// since the zero time, whatever the zone.
//
// Cron slots are wall-clock times in the zone: a slot that does not exist
// because the clocks go forward (02:30 on a spring-forward night) is
// skipped, and one that occurs twice because they go back runs once, at its
// first occurrence.
type Cron struct {
	every time.Duration // @every; the fields are unused then
	loc   *time.Location

	minute, hour, dom, month, dow uint64 // bit i set: value i matches
	domStar, dowStar              bool
}

// MinEvery is the shortest @every interval.
const MinEvery = time.Second

var shorthands = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

var monthNames = map[string]int{"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6,
	"JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12}

var dayNames = map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

// field describes one of the five fields.
type field struct {
	name     string
	min, max int
	names    map[string]int
}

var fields = [5]field{
	{"minute", 0, 59, nil},
	{"hour", 0, 23, nil},
	{"day-of-month", 1, 31, nil},
	{"month", 1, 12, monthNames},
	{"day-of-week", 0, 7, dayNames},
}

// ParseCron parses expr in the time zone zone (a time.LoadLocation name;
// "" is UTC). Its errors name the field at fault.
func ParseCron(expr, zone string) (*Cron, error) {
	loc, err := loadZone(zone)
	if err != nil {
		return nil, err
	}
	expr = strings.TrimSpace(expr)
	if len(expr) >= len("@every") && strings.EqualFold(expr[:len("@every")], "@every") {
		d := expr[len("@every"):]
		if d == "" || (d[0] != ' ' && d[0] != '\t') {
			return nil, fmt.Errorf("invalid cron %q: @every needs a duration, as in \"@every 15m\"", expr)
		}
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return nil, fmt.Errorf("invalid cron %q: @every: %w", expr, err)
		}
		if every < MinEvery {
			return nil, fmt.Errorf("invalid cron %q: @every %s is shorter than %s", expr, every, MinEvery)
		}
		return &Cron{every: every, loc: loc}, nil
	}
	spec := expr
	if strings.HasPrefix(expr, "@") {
		s, ok := shorthands[strings.ToLower(expr)]
		if !ok {
			return nil, fmt.Errorf("invalid cron %q: unknown shorthand (want @hourly, @daily, @weekly, @monthly, @yearly or @every DURATION)", expr)
		}
		spec = s
	}
	parts := strings.Fields(spec)
	if len(parts) != 5 {
		return nil, fmt.Errorf("invalid cron %q: %d fields, want 5 (minute hour day-of-month month day-of-week)", expr, len(parts))
	}
	c := &Cron{loc: loc}
	dest := [5]*uint64{&c.minute, &c.hour, &c.dom, &c.month, &c.dow}
	for i, p := range parts {
		bits, err := parseField(p, fields[i])
		if err != nil {
			return nil, fmt.Errorf("invalid cron %q: %s field %q: %w", expr, fields[i].name, p, err)
		}
		*dest[i] = bits
	}
	if c.dow&(1<<7) != 0 { // 7 is Sunday too
		c.dow = c.dow&^(1<<7) | 1
	}
	c.domStar = strings.HasPrefix(parts[2], "*")
	c.dowStar = strings.HasPrefix(parts[4], "*")
	return c, nil
}

func loadZone(zone string) (*time.Location, error) {
	if zone == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("invalid time zone %q: %w", zone, err)
	}
	return loc, nil
}

// parseField returns the set of values a field matches.
func parseField(s string, f field) (uint64, error) {
	var bits uint64
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			return 0, fmt.Errorf("empty list item")
		}
		rng, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("step %q is not a positive number", stepText)
			}
			if n > f.max-f.min+1 {
				return 0, fmt.Errorf("step %d is larger than the field's range %d-%d", n, f.min, f.max)
			}
			step = n
		}
		lo, hi := f.min, f.max
		if rng != "*" {
			a, b, isRange := strings.Cut(rng, "-")
			var err error
			if lo, err = value(a, f); err != nil {
				return 0, err
			}
			hi = lo
			if isRange {
				if hi, err = value(b, f); err != nil {
					return 0, err
				}
				if hi < lo {
					return 0, fmt.Errorf("range %q runs backwards", rng)
				}
			} else if hasStep {
				hi = f.max // "a/n" means a, a+n, ... up to the maximum
			}
		}
		for v := lo; v <= hi; v += step {
			bits |= 1 << v
		}
	}
	return bits, nil
}

func value(s string, f field) (int, error) {
	if v, ok := f.names[strings.ToUpper(s)]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		if f.names != nil {
			return 0, fmt.Errorf("%q is neither a number nor a name", s)
		}
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v < f.min || v > f.max {
		return 0, fmt.Errorf("%d is out of range %d-%d", v, f.min, f.max)
	}
	return v, nil
}

// Location returns the cron's time zone.
func (c *Cron) Location() *time.Location { return c.loc }

// Next returns the first slot strictly after after, in the cron's zone, or
// the zero time when there is none within five years (such as "0 0 30 2 *").
func (c *Cron) Next(after time.Time) time.Time {
	if c.every > 0 {
		return after.Truncate(c.every).Add(c.every).In(c.loc)
	}
	t := after.In(c.loc)
	// Walk wall-clock minutes, in the zone's calendar, from the next minute.
	y, mo, d := t.Date()
	h, mi := t.Hour(), t.Minute()+1
	limit := y + 5
	for y <= limit {
		if c.month&(1<<uint(mo)) == 0 {
			y, mo, d, h, mi = nextMonth(y, mo)
			continue
		}
		if d > daysIn(y, mo) {
			y, mo, d, h, mi = nextMonth(y, mo)
			continue
		}
		if !c.dayMatches(y, mo, d) {
			d, h, mi = d+1, 0, 0
			continue
		}
		if h > 23 || c.hour&(1<<uint(h)) == 0 {
			if h > 23 {
				d, h, mi = d+1, 0, 0
			} else {
				h, mi = h+1, 0
			}
			continue
		}
		if mi > 59 || c.minute&(1<<uint(mi)) == 0 {
			if mi > 59 {
				h, mi = h+1, 0
			} else {
				mi++
			}
			continue
		}
		slot := time.Date(y, mo, d, h, mi, 0, 0, c.loc)
		// time.Date normalizes a wall time that does not exist (a gap)
		// to another hour, and picks the first of a repeated one: keep
		// only a slot whose wall clock is the one asked for, once.
		if slot.Hour() == h && slot.Minute() == mi && slot.Day() == d {
			slot = firstOccurrence(slot)
			if slot.After(after) {
				return slot
			}
		}
		mi++
	}
	return time.Time{}
}

func (c *Cron) dayMatches(y int, mo time.Month, d int) bool {
	domOK := c.dom&(1<<uint(d)) != 0
	dowOK := c.dow&(1<<uint(time.Date(y, mo, d, 0, 0, 0, 0, time.UTC).Weekday())) != 0
	if c.domStar || c.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

func nextMonth(y int, mo time.Month) (int, time.Month, int, int, int) {
	if mo == time.December {
		return y + 1, time.January, 1, 0, 0
	}
	return y, mo + 1, 1, 0, 0
}

func daysIn(y int, mo time.Month) int {
	return time.Date(y, mo+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// firstOccurrence returns the earliest instant whose wall clock in t's zone
// is t's: when the clocks go back, a wall time occurs twice.
func firstOccurrence(t time.Time) time.Time {
	for _, d := range []time.Duration{2 * time.Hour, time.Hour, 30 * time.Minute} {
		if e := t.Add(-d); sameWallClock(e, t) {
			return e
		}
	}
	return t
}

func sameWallClock(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd && a.Hour() == b.Hour() && a.Minute() == b.Minute()
}
