package executor

import "time"

// claimRetries counts the failed claims in a row of a loop that claims (the
// claim loop, the priority lane), and says when it tries again.
type claimRetries struct {
	failures int // claims failed in a row
	severed  int // of them, with their connection severed
}

// failed counts the claim that failed with err, logs it as what failed
// ("claim", "priority claim"), and says when to claim again: at once when
// its connection was severed (a killed backend, a pooler's restart: another
// connection most likely works, see env.atOnce), else after wait, a backoff
// from PollInterval/4 to 10 PollIntervals.
func (r *claimRetries) failed(v *env, err error, what string) (wait time.Duration, atOnce bool) {
	r.failures++
	if v.atOnce(err, r.severed+1) {
		r.severed++
		v.log.Warn("corotask: "+what+"'s connection was severed; retrying at once", "error", err)
		return 0, true
	}
	wait = backoff(v.cfg.PollInterval/4, v.cfg.PollInterval*10, r.failures)
	v.log.Error("corotask: "+what+" failed; retrying", "error", err, "retry_in", wait)
	return wait, false
}

// succeeded starts the count again.
func (r *claimRetries) succeeded() { *r = claimRetries{} }
