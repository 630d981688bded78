package bench

import (
	"math"
	"time"
)

// recoveryHold is how long the backlog must stay at or under its level
// before the pressure for the scenario to count as recovered.
const recoveryHold = time.Second

// pressureMeasure computes the scenario's figures from its tasks and
// backlog samples.
type pressureMeasure struct {
	ph       phases
	tasks    []pressureTask
	samples  []backlogSample
	produced int64 // tasks the producer committed
	rate     int   // tasks the producer creates a second
}

// window is a span of time [from, to).
type window struct{ from, to time.Time }

func (w window) has(t time.Time) bool { return !t.Before(w.from) && t.Before(w.to) }
func (w window) len() time.Duration   { return w.to.Sub(w.from) }

// windows: "before" is the second half of the warmup (the first is the
// executors' start), "during" the pressure, "after" the rest of the
// producer's run.
func (m pressureMeasure) windows() (before, during, after window) {
	ph := m.ph
	return window{ph.start.Add(ph.pressure.Sub(ph.start) / 2), ph.pressure},
		window{ph.pressure, ph.release}, window{ph.release, ph.stop}
}

func (m pressureMeasure) record(res *Result) {
	m.recordCounts(res)
	before, during, after := m.windows()
	for _, w := range []struct {
		win                   window
		offered, done, pickup string
	}{
		{before, "offered_per_sec_before", "done_per_sec_before", "_before"},
		{during, "offered_per_sec", "done_per_sec_during", ""},
		{after, "offered_per_sec_after", "done_per_sec_after", "_after"},
	} {
		created, done, pickups := m.in(w.win)
		res.metric(w.offered, rate(created, w.win.len()))
		res.metric(w.done, rate(done, w.win.len()))
		p := percentiles(pickups, 50, 99, 100)
		res.metric("pickup_p50_ms"+w.pickup, p[0])
		res.metric("pickup_p99_ms"+w.pickup, p[1])
		if w.pickup == "" {
			res.metric("pickup_max_ms", p[2])
		}
	}
	if during.len() >= 2*time.Minute {
		_, first, _ := m.in(window{during.from, during.from.Add(time.Minute)})
		_, last, _ := m.in(window{during.to.Add(-time.Minute), during.to})
		res.metric("done_per_sec_first_min", float64(first)/60)
		res.metric("done_per_sec_last_min", float64(last)/60)
		res.metric("last_vs_first_min", float64(last)/float64(first))
	}
	m.recordBacklog(res, before)
	res.Series = m.series()
}

// recordCounts checks what was created against what the producer
// committed, and counts what was done, lost and polled again.
func (m pressureMeasure) recordCounts(res *Result) {
	seen := make(map[int64]bool, len(m.tasks))
	var doubled, done, failed, repolled int64
	for _, t := range m.tasks {
		if seen[t.seq] {
			doubled++
		}
		seen[t.seq] = true
		switch {
		case !t.done.IsZero():
			done++
		case t.ended:
			failed++
		}
		if t.attempts > 1 {
			repolled++
		}
	}
	var missing int64
	for i := range m.produced {
		if !seen[i] {
			missing++
		}
	}
	created := int64(len(m.tasks))
	res.metric("created", created)
	res.metric("created_missing", missing)
	res.metric("created_twice", doubled)
	res.metric("done", done)
	res.metric("lost", created-done)
	res.metric("ended_not_done", failed)
	res.metric("repolled", repolled)
}

// in returns how many tasks were created in w and done in w, and the
// pickup latencies of those created in w and done.
func (m pressureMeasure) in(w window) (created, done int, pickups []time.Duration) {
	for _, t := range m.tasks {
		if w.has(t.created) {
			created++
			if !t.pollStart.IsZero() && !t.done.IsZero() {
				pickups = append(pickups, t.pollStart.Sub(t.created))
			}
		}
		if !t.done.IsZero() && w.has(t.done) {
			done++
		}
	}
	return created, done, pickups
}

// recordBacklog records the backlog before the pressure (the highest
// sampled in before), its peak from the pressure on, and how long after
// the pressure it took to come back to its level before. That level is
// backlog_before plus one producer batch (Rate × produceEvery): the
// backlog moves by whole batches, and a sample taken just before a batch is
// claimed sees one more than the sample before it, pressure or not.
func (m pressureMeasure) recordBacklog(res *Result, before window) {
	var base, peak int64
	var peakAt time.Time
	for _, s := range m.samples {
		switch {
		case before.has(s.at):
			base = max(base, s.n)
		case !s.at.Before(m.ph.pressure) && s.n > peak:
			peak, peakAt = s.n, s.at
		}
	}
	res.metric("backlog_before", base)
	res.metric("backlog_peak", peak)
	if !peakAt.IsZero() {
		res.metric("backlog_peak_at_sec", peakAt.Sub(m.ph.pressure).Seconds())
	}
	for _, s := range m.samples {
		if !s.at.Before(m.ph.release) {
			res.metric("backlog_at_release", s.n)
			break
		}
	}
	level := base + int64(math.Ceil(float64(m.rate)*produceEvery.Seconds()))
	res.metric("recovery_level", level)
	if d, ok := recovery(m.samples, m.ph.release, level); ok {
		res.metric("recovery_sec", d.Seconds())
	} else {
		res.metric("recovery_sec", nil)
		res.note("recovery_sec: the backlog never came back to %d (recovery_level) for %s after the pressure", level, recoveryHold)
	}
}

// recovery returns the time from release to the first sample at or after
// it from which the backlog stays at or under baseline for recoveryHold
// (or until the last sample, when sooner), and whether there is one.
func recovery(samples []backlogSample, release time.Time, baseline int64) (time.Duration, bool) {
	for i, s := range samples {
		if s.at.Before(release) || s.n > baseline {
			continue
		}
		held := true
		for _, t := range samples[i+1:] {
			if t.at.Sub(s.at) > recoveryHold {
				break
			}
			if t.n > baseline {
				held = false
				break
			}
		}
		if held {
			return s.at.Sub(release), true
		}
	}
	return 0, false
}

// series is one row per second from the start of the warmup until the
// last task done or the last sample: tasks created and done in that
// second, and the highest backlog sampled in it.
func (m pressureMeasure) series() []Fields {
	start := m.ph.start
	sec := func(t time.Time) int { return int(t.Sub(start) / time.Second) }
	type bucket struct {
		created, done int
		backlog       int64
		sampled       bool
	}
	var bs []bucket
	at := func(i int) *bucket {
		if i < 0 {
			i = 0
		}
		for len(bs) <= i {
			bs = append(bs, bucket{})
		}
		return &bs[i]
	}
	for _, t := range m.tasks {
		at(sec(t.created)).created++
		if !t.done.IsZero() {
			at(sec(t.done)).done++
		}
	}
	for _, s := range m.samples {
		b := at(sec(s.at))
		b.backlog, b.sampled = max(b.backlog, s.n), true
	}
	out := make([]Fields, len(bs))
	for i, b := range bs {
		t := start.Add(time.Duration(i) * time.Second)
		phase := "drain"
		switch {
		case t.Before(m.ph.pressure):
			phase = "warmup"
		case t.Before(m.ph.release):
			phase = "pressure"
		case t.Before(m.ph.stop):
			phase = "after"
		}
		var backlog any
		if b.sampled {
			backlog = b.backlog
		}
		out[i] = Fields{{"sec", i}, {"phase", phase}, {"created", b.created}, {"done", b.done}, {"backlog_max", backlog}}
	}
	return out
}
