package bench

import (
	"slices"
	"sync"
	"time"
)

// pollSpans records the start and end of polls, in UnixNano, as the poll
// function sees them (within the poll's claim): the limit scenario counts
// from them how many polls ran at once, without trusting the engine's own
// count.
type pollSpans struct {
	mu    sync.Mutex
	spans []int64 // start, end, start, end, ...
}

func (p *pollSpans) add(start, end time.Time) {
	p.mu.Lock()
	p.spans = append(p.spans, start.UnixNano(), end.UnixNano())
	p.mu.Unlock()
}

// flat returns the spans recorded so far: start, end, start, end, ...
func (p *pollSpans) flat() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.spans)
}

// overlap is what a set of intervals says of concurrency.
type overlap struct {
	// max is the most intervals open at one instant.
	max int
	// mean is the time-weighted mean of intervals open, from the first
	// start to the last end.
	mean float64
	// intervals is how many there were.
	intervals int
}

// measureOverlap computes the overlap of intervals given flat (start, end,
// start, end, ..., in UnixNano; from any number of processes of one
// machine, whose clocks are the same). An interval that ends at the instant
// another starts does not overlap it. flat with an odd length, or an
// interval that ends before it starts, counts as what it says (the end
// clamped to the start).
func measureOverlap(flat []int64) overlap {
	type event struct {
		at    int64
		delta int // +1 start, -1 end
	}
	n := len(flat) / 2
	if n == 0 {
		return overlap{}
	}
	events := make([]event, 0, 2*n)
	var busy int64
	first, last := flat[0], flat[1]
	for i := range n {
		s, e := flat[2*i], max(flat[2*i+1], flat[2*i])
		events = append(events, event{s, +1}, event{e, -1})
		busy += e - s
		first, last = min(first, s), max(last, e)
	}
	slices.SortFunc(events, func(a, b event) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return a.delta - b.delta // ends first
	})
	o := overlap{intervals: n}
	open := 0
	for _, ev := range events {
		open += ev.delta
		o.max = max(o.max, open)
	}
	if last > first {
		o.mean = float64(busy) / float64(last-first)
	}
	return o
}
