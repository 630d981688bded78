package bench

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

// clockTick is the unit of /proc CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuSample is the machine's CPU time so far (from /proc/stat), the CPU
// time of the server processes serving the scenario's database, and that of
// this process.
type cpuSample struct {
	at       time.Time
	busy     time.Duration // all CPUs: user, nice, system, irq, softirq, steal
	iowait   time.Duration
	total    time.Duration
	backends map[int]time.Duration // by pid: the backends connected to the scenario's database
	self     time.Duration
	ok       bool // /proc was readable
}

// sampleCPU samples CPU times; with db (not nil), also those of the
// backends connected to db's database.
func sampleCPU(ctx context.Context, db tasks.DB) cpuSample {
	s := cpuSample{at: time.Now(), self: selfCPU()}
	if db != nil {
		s.backends = backendCPU(ctx, db)
	}
	if runtime.GOOS != "linux" {
		return s
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return s
	}
	var v [10]int64
	for i := 1; i < len(f) && i <= 10; i++ {
		v[i-1], _ = strconv.ParseInt(f[i], 10, 64)
	}
	// user nice system idle iowait irq softirq steal guest guest_nice
	busy := v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	s.busy = time.Duration(busy) * clockTick
	s.iowait = time.Duration(v[4]) * clockTick
	s.total = time.Duration(busy+v[3]+v[4]) * clockTick
	s.ok = true
	return s
}

// backendCPU returns the CPU time of each server process connected to db's
// database, when the server runs on this machine (none otherwise).
func backendCPU(ctx context.Context, db tasks.DB) map[int]time.Duration {
	rows, err := db.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := map[int]time.Duration{}
	for _, pid := range pids {
		if d, ok := processCPU(int(pid)); ok {
			out[int(pid)] = d
		}
	}
	return out
}

// processCPU returns the CPU time (user and system) of process pid, if it
// is a PostgreSQL process of this machine.
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || s[open+1:end] != "postgres" {
		return 0, false
	}
	f := strings.Fields(s[end+1:])
	// Fields after the name: state(0) ... utime(11) stime(12).
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * clockTick, true
}

// cpuUsage is what happened between two samples.
type cpuUsage struct {
	wall     time.Duration
	busy     float64 // fraction of all CPUs busy
	iowait   float64
	postgres time.Duration // CPU time of the backends of the scenario's database
	self     time.Duration // CPU time of this process
	ok       bool
	pgOK     bool // postgres was measured
}

func (a cpuSample) until(b cpuSample) cpuUsage {
	u := cpuUsage{wall: b.at.Sub(a.at), self: b.self - a.self, ok: a.ok && b.ok}
	if u.ok && b.total > a.total {
		u.busy = float64(b.busy-a.busy) / float64(b.total-a.total)
		u.iowait = float64(b.iowait-a.iowait) / float64(b.total-a.total)
	}
	// Backends that started in between count whole; those that exited are
	// missing (the scenarios sample before they close their pools).
	for pid, d := range b.backends {
		u.postgres += d - a.backends[pid]
		u.pgOK = true
	}
	return u
}

// rssBytes returns this process's resident set size and its peak, from
// /proc/self/status (zero elsewhere).
func rssBytes() (rss, peak int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n * 1024
		case "VmHWM":
			peak = n * 1024
		}
	}
	return rss, peak
}
