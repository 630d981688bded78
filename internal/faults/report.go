package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Logs is what the workers' logs and attempt logs say.
type Logs struct {
	// Attempts counts attempt-log lines: "A fault.node" (polls begun, by
	// type), "E" (injected errors), "P" (panics), "S" (stalls), "D" (polls of
	// doomed tasks), "K poll" and "K commit" (self-inflicted SIGKILLs).
	Attempts map[string]int
	// Messages counts executor log records by message (and, for failed
	// polls, by reason: injected, doomed, other).
	Messages map[string]int
	// Spurious are failed polls whose error was neither injected nor a doomed
	// task's: a transient database error that should have been retried, or a
	// bug (at most 10 kept).
	Spurious []string
	Races    int      // data race reports
	Crashes  []string // Go panics or fatal errors that killed a worker (at most 10)
}

// ScanLogs reads the *.log and *.attempts files of dir.
func ScanLogs(dir string) (*Logs, error) {
	l := &Logs{Attempts: map[string]int{}, Messages: map[string]int{}}
	attempts, err := filepath.Glob(filepath.Join(dir, "*.attempts"))
	if err != nil {
		return nil, err
	}
	for _, path := range attempts {
		err := eachLine(path, func(line string) {
			f := strings.Fields(line)
			switch {
			case len(f) >= 2 && (f[0] == "A" || f[0] == "K"):
				l.Attempts[f[0]+" "+f[1]]++
			case len(f) >= 1:
				l.Attempts[f[0]]++
			}
		})
		if err != nil {
			return nil, err
		}
	}
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	for _, path := range logs {
		err := eachLine(path, func(line string) {
			if !strings.HasPrefix(line, "{") {
				switch {
				case strings.Contains(line, "WARNING: DATA RACE"):
					l.Races++
				case strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:"):
					if len(l.Crashes) < 10 {
						l.Crashes = append(l.Crashes, filepath.Base(path)+": "+line)
					}
				}
				return
			}
			var rec struct {
				Msg   string `json:"msg"`
				Error string `json:"error"`
				Cause string `json:"cause"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil {
				return
			}
			key := rec.Msg
			switch rec.Msg {
			case "corotask: poll failed; retrying later", "corotask: task failed for good after too many failures",
				"corotask: poll failed and its claim was lost":
				switch {
				case strings.Contains(rec.Error, errInjected.Error()):
					key += " [injected error]"
				case strings.Contains(rec.Error, "panicked: injected panic"):
					key += " [injected panic]"
				case strings.Contains(rec.Error, "doomed"):
					key += " [doomed]"
				default:
					key += " [other]"
					if len(l.Spurious) < 10 {
						l.Spurious = append(l.Spurious, rec.Error)
					}
				}
			case "corotask: poll's claim was lost; its outcome is discarded":
				key += " [" + rec.Cause + "]"
			}
			l.Messages[key]++
		})
		if err != nil {
			return nil, err
		}
	}
	return l, nil
}

// SpuriousFailures counts failed polls whose error was neither injected nor
// a doomed task's.
func (l *Logs) SpuriousFailures() int {
	n := 0
	for k, v := range l.Messages {
		if strings.HasSuffix(k, " [other]") {
			n += v
		}
	}
	return n
}

func eachLine(path string, f func(string)) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		f(sc.Text())
	}
	return sc.Err()
}

// Report is the outcome of a Run.
type Report struct {
	Seed                 uint64
	Workers              int
	FaultTime, DrainTime time.Duration
	Roots                int // root tasks the harness created
	RestartsEnabled      bool
	Ledger               *Ledger
	Logs                 *Logs
	Harness              map[string]int // what the harness did and saw
	Limits               *Limits        // what the limits sampler saw
}

// Faults returns the faults injected, by kind.
func (r *Report) Faults() map[string]int {
	f := map[string]int{}
	for _, k := range []string{FaultKill, FaultFreeze, FaultTerminate, FaultRestart, FaultCrash} {
		f[k] = r.Harness[k]
	}
	f[FaultKillPoll] = r.Logs.Attempts["K poll"]
	f[FaultKillCommit] = r.Logs.Attempts["K commit"]
	f[FaultPollError] = r.Logs.Attempts["E"]
	f[FaultPollPanic] = r.Logs.Attempts["P"]
	f[FaultPollStall] = r.Logs.Attempts["S"]
	f[FaultDecodePanic] = r.Logs.Attempts["PD"]
	f[FaultCommitPanic] = r.Logs.Attempts["PC"]
	f[FaultLockWait] = r.Logs.Attempts["L"]
	f[FaultPoison] = r.Harness[FaultPoison]
	return f
}

// TotalFaults is the number of faults injected.
func (r *Report) TotalFaults() int {
	n := 0
	for _, v := range r.Faults() {
		n += v
	}
	return n
}

// PollsBegun counts polls of the tasks that commit (all but doomed ones).
func (r *Report) PollsBegun() int {
	return r.Logs.Attempts["A "+string(TypeRoot)] + r.Logs.Attempts["A "+string(TypeNode)] + r.Logs.Attempts["A "+string(TypeVictim)]
}

// Violations lists every broken guarantee and every sign of a bug.
func (r *Report) Violations() []string {
	v := r.Ledger.Violations()
	v = append(v, r.Limits.Violations()...)
	if r.Logs.Races > 0 {
		v = append(v, fmt.Sprintf("%d data races reported by workers", r.Logs.Races))
	}
	for _, c := range r.Logs.Crashes {
		v = append(v, "worker crashed: "+c)
	}
	if n := r.Harness[UnexpectedExits]; n > 0 {
		v = append(v, fmt.Sprintf("%d worker processes exited on their own", n))
	}
	if n := r.Harness["workers that did not stop on SIGTERM"]; n > 0 {
		v = append(v, "workers did not stop on SIGTERM")
	}
	if n := r.Harness["postgres restarts that failed"]; n > 0 {
		v = append(v, fmt.Sprintf("%d postgres restarts failed", n))
	}
	if n := r.Logs.SpuriousFailures(); n > 0 {
		v = append(v, fmt.Sprintf("%d polls failed for a reason that was not injected (a transient database error must be retried, not fail the poll)", n))
		for _, s := range r.Logs.Spurious {
			v = append(v, "  "+s)
		}
	}
	if r.Ledger.CommittedPolls == 0 || r.Ledger.Total.Sent == 0 {
		v = append(v, "the workload did nothing")
	}
	return v
}

// String prints the figures.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %d workers, faults for %s, drained in %s, %d roots created\n",
		r.Seed, r.Workers, r.FaultTime.Round(time.Second), r.DrainTime.Round(100*time.Millisecond), r.Roots)
	b.WriteString(r.Ledger.String())
	b.WriteString(r.Limits.String())
	begun := r.PollsBegun()
	fmt.Fprintf(&b, "polls: begun %d, committed %d, repeated (begun, not committed) %d; doomed polls %d\n",
		begun, r.Ledger.CommittedPolls, begun-r.Ledger.CommittedPolls, r.Logs.Attempts["D"])
	fmt.Fprintf(&b, "faults injected: %d\n", r.TotalFaults())
	faults := r.Faults()
	for _, k := range sortedKeys(faults) {
		fmt.Fprintf(&b, "  %-40s %d\n", k, faults[k])
	}
	if !r.RestartsEnabled {
		b.WriteString("  (postgres restarts disabled: the server is not the harness's own)\n")
	}
	b.WriteString("harness:\n")
	for _, k := range sortedKeys(r.Harness) {
		fmt.Fprintf(&b, "  %-40s %d\n", k, r.Harness[k])
	}
	b.WriteString("executor logs:\n")
	for _, k := range sortedKeys(r.Logs.Messages) {
		fmt.Fprintf(&b, "  %-90s %d\n", k, r.Logs.Messages[k])
	}
	fmt.Fprintf(&b, "lost: %d, duplicated: %d, violations: %d\n",
		r.Ledger.Total.Lost, r.Ledger.Total.Duplicated, len(r.Violations()))
	return b.String()
}
