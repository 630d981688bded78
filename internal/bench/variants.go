package bench

import "fmt"

// variants returns the runs o asks for: o itself, or, with -history both or
// -keys both, o without the feature then with it, back to back (the same
// machine state for both, as near as two runs get).
func (o Options) variants() []Options {
	switch {
	case o.History == "both":
		off, on := o, o
		off.History, on.History = "off", "on"
		return []Options{off, on}
	case o.Keys == "both":
		off, on := o, o
		off.Keys, on.Keys = "off", "on"
		return []Options{off, on}
	}
	return []Options{o}
}

// variantLabel names the run in errors.
func (o Options) variantLabel() string {
	if o.Scenario == "create" {
		return fmt.Sprintf("history %s, keys %s", o.History, o.Keys)
	}
	return "history " + o.History
}

// compareVariants adds to second, the run with the feature on, its
// headline figure (create's tasks/s for -keys) relative to first's, the run
// just before without it.
func compareVariants(s scenario, o Options, first, second *Result) {
	feature, headline := "history", s.headline
	if o.Keys == "both" {
		feature, headline = "keys", "tasks_per_sec"
	}
	if headline == "" {
		return
	}
	a, b := first.Metrics.Float(headline), second.Metrics.Float(headline)
	if !(a > 0) {
		return
	}
	second.metric(feature+"_on_vs_off", b/a)
	second.note("%s with %s on is %.2fx the run with %s off just before (%.0f vs %.0f)", headline, feature, b/a, feature, b, a)
}
