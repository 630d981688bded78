package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is what one scenario measured.
type Result struct {
	Scenario string
	// Env describes the machine and the server.
	Env Env
	// Params are the sizes the scenario ran with.
	Params Fields
	// Metrics are its figures; a name ends with its unit (_ms, _per_sec,
	// _bytes, ...).
	Metrics Fields
	// Series is a time series (bloat's samples), one Fields per sample.
	Series []Fields
	// Statements are the scenario's top statements by total time, when
	// Options.Statements and pg_stat_statements are available.
	Statements []Statement
	// Notes say how to read the figures (what was approximated, what ran
	// where).
	Notes   []string
	Started time.Time
	Elapsed time.Duration
}

// Env describes where a scenario ran.
type Env struct {
	Server            string `json:"server"`             // PostgreSQL version
	SynchronousCommit string `json:"synchronous_commit"` // the durability the figures are for
	SharedBuffers     string `json:"shared_buffers"`
	MaxConnections    string `json:"max_connections"`
	Autovacuum        string `json:"autovacuum"`
	// Private is set when the scenario ran on a throwaway private cluster
	// (Options.StockCluster).
	Private   bool   `json:"private_cluster,omitempty"`
	Host      string `json:"host"` // where the server is, as the URL says (password-free)
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go"`
	OS        string `json:"os"`
}

// Statement is one row of pg_stat_statements.
type Statement struct {
	Query   string  `json:"query"`
	Calls   int64   `json:"calls"`
	TotalMS float64 `json:"total_ms"`
	MeanMS  float64 `json:"mean_ms"`
	Rows    int64   `json:"rows"`
	// SharedHit and SharedRead are buffer pages found in shared buffers and
	// read from the OS.
	SharedHit  int64 `json:"shared_blks_hit"`
	SharedRead int64 `json:"shared_blks_read"`
	WALBytes   int64 `json:"wal_bytes"`
	// JITMS is the time spent JIT-compiling the statement, in all calls.
	JITMS float64 `json:"jit_ms"`
}

// Field is one named value.
type Field struct {
	Name  string
	Value any
}

// Fields keeps named values in the order they were added; it encodes as a
// JSON object.
type Fields []Field

// Get returns the value named name, or nil.
func (fs Fields) Get(name string) any {
	for _, f := range fs {
		if f.Name == name {
			return f.Value
		}
	}
	return nil
}

// Float returns the value named name as a float64 (NaN when absent or not a number).
func (fs Fields) Float(name string) float64 {
	switch v := fs.Get(name).(type) {
	case float64:
		return v
	case int:
		return float64(v)
	case int64:
		return float64(v)
	}
	return math.NaN()
}

func (fs *Fields) set(name string, v any) {
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		v = nil
	}
	for i := range *fs {
		if (*fs)[i].Name == name {
			(*fs)[i].Value = v
			return
		}
	}
	*fs = append(*fs, Field{name, v})
}

// MarshalJSON encodes fs as an object, in order.
func (fs Fields) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Name)
		b.Write(k)
		b.WriteByte(':')
		v := f.Value
		if fl, ok := v.(float64); ok {
			v = round(fl)
		}
		if d, ok := v.(time.Duration); ok {
			v = d.String()
		}
		vb, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// round keeps 4 significant digits after the point, enough for figures.
func round(f float64) float64 {
	if f == 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return f
	}
	mag := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(f))))
	if mag < 1 {
		return math.Round(f)
	}
	return math.Round(f*mag) / mag
}

func (r *Result) param(name string, v any)     { r.Params.set(name, v) }
func (r *Result) metric(name string, v any)    { r.Metrics.set(name, v) }
func (r *Result) note(format string, a ...any) { r.Notes = append(r.Notes, fmt.Sprintf(format, a...)) }

type resultJSON struct {
	Scenario   string      `json:"scenario"`
	Started    time.Time   `json:"started"`
	ElapsedSec float64     `json:"elapsed_sec"`
	Env        Env         `json:"env"`
	Params     Fields      `json:"params"`
	Metrics    Fields      `json:"metrics"`
	Series     []Fields    `json:"series,omitempty"`
	Statements []Statement `json:"statements,omitempty"`
	Notes      []string    `json:"notes,omitempty"`
}

// MarshalJSON encodes the record `corotask bench --json` prints.
func (r *Result) MarshalJSON() ([]byte, error) {
	params, metrics := r.Params, r.Metrics
	if params == nil {
		params = Fields{}
	}
	if metrics == nil {
		metrics = Fields{}
	}
	return json.Marshal(resultJSON{
		Scenario: r.Scenario, Started: r.Started.UTC(), ElapsedSec: round(r.Elapsed.Seconds()), Env: r.Env,
		Params: params, Metrics: metrics, Series: r.Series, Statements: r.Statements, Notes: r.Notes,
	})
}

func (r *Result) writeJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// writeText prints r for people; withEnv adds the machine's description.
func (r *Result) writeText(w io.Writer, withEnv bool) {
	if withEnv {
		e := r.Env
		where := e.Host
		if e.Private {
			where = "a throwaway private cluster (" + e.Host + ")"
		}
		fmt.Fprintf(w, "machine: %d CPUs, %s, %s; server: PostgreSQL %s at %s, synchronous_commit=%s, shared_buffers=%s, autovacuum=%s\n\n",
			e.CPUs, e.OS, e.GoVersion, e.Server, where, e.SynchronousCommit, e.SharedBuffers, e.Autovacuum)
	}
	var ps []string
	for _, p := range r.Params {
		ps = append(ps, fmt.Sprintf("%s=%s", p.Name, format("", p.Value)))
	}
	fmt.Fprintf(w, "%s (%s), %.1fs\n", r.Scenario, strings.Join(ps, " "), r.Elapsed.Seconds())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, m := range r.Metrics {
		fmt.Fprintf(tw, "  \t%s\t  %s\t\n", format(m.Name, m.Value), m.Name)
	}
	tw.Flush()
	if len(r.Series) > 0 {
		var cols []string
		for _, f := range r.Series[0] {
			cols = append(cols, f.Name)
		}
		fmt.Fprintln(w, "  samples:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  \t%s\t\n", strings.Join(cols, "\t"))
		for _, s := range r.Series {
			var vs []string
			for _, c := range cols {
				vs = append(vs, format(c, s.Get(c)))
			}
			fmt.Fprintf(tw, "  \t%s\t\n", strings.Join(vs, "\t"))
		}
		tw.Flush()
	}
	if len(r.Statements) > 0 {
		fmt.Fprintln(w, "  top statements (pg_stat_statements):")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  calls\ttotal ms\tmean ms\tJIT ms\trows\tshared hit\tWAL bytes\tquery")
		for _, s := range r.Statements {
			fmt.Fprintf(tw, "  %d\t%.0f\t%.3f\t%.0f\t%d\t%d\t%d\t%s\n", s.Calls, s.TotalMS, s.MeanMS, s.JITMS, s.Rows, s.SharedHit, s.WALBytes, s.Query)
		}
		tw.Flush()
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// format prints a value for people: thousands separators for counts,
// sensible precision for rates and times.
func format(name string, v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case int:
		return thousands(int64(x))
	case int64:
		return thousands(x)
	case float64:
		switch {
		case math.IsNaN(x):
			return "-"
		case strings.HasSuffix(name, "_bytes"):
			return bytesize(x)
		case math.Abs(x) >= 1000:
			return thousands(int64(math.Round(x)))
		case math.Abs(x) >= 100:
			return fmt.Sprintf("%.0f", x)
		case math.Abs(x) >= 10:
			return fmt.Sprintf("%.1f", x)
		default:
			return fmt.Sprintf("%.3g", x)
		}
	case time.Duration:
		return x.String()
	case []int:
		s := make([]string, len(x))
		for i, v := range x {
			s[i] = thousands(int64(v))
		}
		return strings.Join(s, ",")
	}
	return fmt.Sprint(v)
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func bytesize(b float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB"}
	i := 0
	for math.Abs(b) >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}

// percentiles returns the p-th percentiles (nearest rank) of ds, in ms.
func percentiles(ds []time.Duration, ps ...float64) []float64 {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	out := make([]float64, len(ps))
	if len(s) == 0 {
		for i := range out {
			out[i] = math.NaN()
		}
		return out
	}
	for i, p := range ps {
		k := int(math.Ceil(p/100*float64(len(s)))) - 1
		k = max(0, min(k, len(s)-1))
		out[i] = ms(s[k])
	}
	return out
}

func mean(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return ms(t) / float64(len(ds))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rate returns n per second over d.
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return math.NaN()
	}
	return float64(n) / d.Seconds()
}

// levelTimings records the mean, p50 and p99 of ds, in ms, as
// mean_ms_LEVEL, p50_ms_LEVEL and p99_ms_LEVEL (the scenarios that time one
// operation at several levels: send, inboxpoll), and returns them.
func (r *Result) levelTimings(level int, ds []time.Duration) (meanMs, p50, p99 float64) {
	p := percentiles(ds, 50, 99)
	meanMs = mean(ds)
	label := fmt.Sprint(level)
	r.metric("mean_ms_"+label, meanMs)
	r.metric("p50_ms_"+label, p[0])
	r.metric("p99_ms_"+label, p[1])
	return meanMs, p[0], p[1]
}

// levelRatio records name, the mean at the highest of levels over that at
// the lowest, when there are two levels or more.
func (r *Result) levelRatio(name string, levels []int, means map[int]float64) {
	if len(levels) > 1 {
		r.metric(name, means[levels[len(levels)-1]]/means[levels[0]])
	}
}
