package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

var limitCmd = &command{
	name:    "limit",
	args:    "[max-running TYPE N | key SPACE N | rate NAME RATE/PER]",
	summary: "show or set the limits of claims: max running, per key, rate",
	help: `Without arguments, show every control of the claims (see docs/flow-control.md):
per task type, whether it is paused (since when, by whom), its maximum of
running polls (MAX_RUNNING) and how many run (RUNNING, claims that count
toward it), its ready tasks (READY) and how many of them the controls hold
back (WAITING), its key space and its rate limit; per key space, its maximum
of running tasks per key, its types and the keys at that limit (the 20 with
the most tasks waiting); per rate limit, its rate, the tokens it holds now
and its types. With --json, print one JSON object (see docs/cli.md).

'limit max-running TYPE N' lets at most N polls of TYPE run at once,
fleet-wide, whatever each executor's concurrency; --clear instead of N
removes the maximum. 'limit key SPACE N --type T ...' lets at most N tasks
with the same limit key run at once among the types given, which become the
key space's types; --clear removes the key space. 'limit rate NAME RATE/PER
--type T ...' lets the types given start at most RATE polls per PER (a Go
duration: 100/1m, 5/1s; a bare unit counts one: 100/m), fleet-wide, bursts
of RATE at most; without --type, an existing limit keeps its types (a
new one has none: only programs that call tasks.Acquire take from it);
--clear removes it. A type that no executor has registered and no
task has is refused as a likely typo, unless --allow-new-type. Each change
is recorded in corotask.control_history with your database role: 'limit
--history N' shows the last N changes (pauses, resumes, limits, priorities).`,
	example: `corotask limit
corotask limit max-running orders.checkout 20
corotask limit max-running orders.checkout --clear
corotask limit key tenants 2 --type reports.build --type reports.mail
corotask limit rate payments-api 100/1m --type payments.charge
corotask limit rate payments-api --clear
corotask limit --history 20`,
	flags: func(fs *flag.FlagSet) runFunc {
		clear := fs.Bool("clear", false, "remove the maximum, key space or rate limit named")
		var types typeList
		fs.Var(&types, "type", "with key or rate: a `TYPE` of the key space or rate limit (repeat for each)")
		allowNew := allowNewTypeFlag(fs)
		asJSON := fs.Bool("json", false, "without arguments: print JSON")
		history := fs.Int("history", 0, "without arguments: show the last `N` changes of the controls instead (who, when, what)")
		return func(ctx context.Context, a *app, args []string) error {
			if len(args) == 0 {
				if *clear || len(types) > 0 || *allowNew {
					return usagef("--clear, --type and --allow-new-type go with max-running, key or rate")
				}
				if isSet(fs, "history") {
					if *history < 1 {
						return usagef("--history: N must be at least 1, not %d", *history)
					}
					return a.showControlChanges(ctx, *history, *asJSON)
				}
				return a.showLimits(ctx, *asJSON)
			}
			if isSet(fs, "history") {
				return usagef("--history goes with 'limit' alone")
			}
			if *asJSON {
				return usagef("--json goes with 'limit' alone, which shows the limits")
			}
			l := limitChange{clear: *clear, types: types, opts: controlOptions(*allowNew)}
			if err := l.parse(args); err != nil {
				return err
			}
			var done string
			err := a.withConn(ctx, func(conn *pgx.Conn) (err error) {
				done, err = l.apply(ctx, conn)
				return err
			})
			if err != nil {
				return controlError(err)
			}
			fmt.Fprintln(a.stdout, done)
			return nil
		}
	},
}

// typeList is a repeatable --type.
type typeList []tasks.Type

func (l *typeList) String() string { return fmt.Sprint(*l) }
func (l *typeList) Set(s string) error {
	t := tasks.Type(s)
	if err := t.Validate(); err != nil {
		return err
	}
	*l = append(*l, t)
	return nil
}

// limitChange is a change that 'limit' was asked for.
type limitChange struct {
	what  string // max-running, key or rate
	name  string // the type, key space or rate limit
	n     int    // the maximum, or the rate
	per   time.Duration
	clear bool
	types []tasks.Type
	opts  []tasks.ControlOption
}

// parse reads the change from the arguments.
func (l *limitChange) parse(args []string) error {
	l.what = args[0]
	var valueName string
	switch l.what {
	case "max-running":
		valueName = "N"
		if len(l.types) > 0 {
			return usagef("limit max-running takes no --type: it names its TYPE")
		}
	case "key":
		valueName = "N"
	case "rate":
		valueName = "RATE/PER"
	default:
		return usagef("unknown limit %q: want max-running, key or rate", l.what)
	}
	nameArg := map[string]string{"max-running": "TYPE", "key": "SPACE", "rate": "NAME"}[l.what]
	rest := args[1:]
	if l.clear {
		if err := wantArgs(rest, nameArg); err != nil {
			return err
		}
		if len(l.types) > 0 || len(l.opts) > 0 {
			return usagef("--clear takes no --type nor --allow-new-type")
		}
	} else {
		if len(rest) == 1 {
			return usagef("missing %s argument (or --clear)", valueName)
		}
		if err := wantArgs(rest, nameArg, valueName); err != nil {
			return err
		}
	}
	l.name = rest[0]
	if l.what == "max-running" {
		if err := tasks.Type(l.name).Validate(); err != nil {
			return usagef("%v", err)
		}
	} else if l.name == "" || strings.TrimSpace(l.name) != l.name {
		return usagef("invalid %s %q: empty, or with leading or trailing space", nameArg, l.name)
	}
	if l.clear {
		return nil
	}
	value := rest[1]
	switch l.what {
	case "max-running", "key":
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return usagef("invalid N %q: want a positive integer (pause the type to run none, or --clear)", value)
		}
		l.n = n
		if l.what == "key" && len(l.types) == 0 {
			return usagef("limit key needs the key space's types: --type T (repeat for each)")
		}
	case "rate":
		n, per, err := parseRate(value)
		if err != nil {
			return err
		}
		l.n, l.per = n, per
	}
	return nil
}

// parseRate parses RATE/PER: 100/1m, or 100/m for one minute.
func parseRate(s string) (int, time.Duration, error) {
	bad := func(why string) error {
		return usagef("invalid RATE/PER %q: %s (e.g. 100/1m: a count, a slash and a Go duration)", s, why)
	}
	rate, per, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, bad("no slash")
	}
	n, err := strconv.Atoi(rate)
	if err != nil || n < 1 {
		return 0, 0, bad("RATE is not a positive integer")
	}
	if per != "" && (per[0] < '0' || per[0] > '9') {
		per = "1" + per
	}
	d, err := time.ParseDuration(per)
	if err != nil {
		return 0, 0, bad("PER is not a duration")
	}
	if d < time.Millisecond {
		return 0, 0, bad("PER is below a millisecond")
	}
	return n, d, nil
}

// apply makes the change, and says what it did.
func (l *limitChange) apply(ctx context.Context, db tasks.DB) (string, error) {
	typ := tasks.Type(l.name)
	name := oneLine(l.name)
	switch {
	case l.what == "max-running" && l.clear:
		return "max running of " + name + ": none", tasks.ClearMaxRunning(ctx, db, typ)
	case l.what == "max-running":
		return fmt.Sprintf("max running of %s: %d", name, l.n), tasks.SetMaxRunning(ctx, db, typ, l.n, l.opts...)
	case l.what == "key" && l.clear:
		return "key space " + name + ": removed", tasks.ClearKeyLimit(ctx, db, l.name)
	case l.what == "key":
		done := fmt.Sprintf("key space %s: at most %d running per key, over %s", name, l.n, typeNames(l.types))
		// The types given become the space's: say which ones leave it, so
		// that a partial list is not a silent change.
		left, err := typesLeavingSpace(ctx, db, l.name, l.types)
		if err != nil {
			return "", err
		}
		if len(left) > 0 {
			done += "; no longer over " + typeNames(left)
		}
		return done, tasks.SetKeyLimit(ctx, db, l.name, l.n, l.types, l.opts...)
	case l.clear:
		return "rate limit " + name + ": removed", tasks.ClearRateLimit(ctx, db, l.name)
	}
	taken := "taken by " + typeNames(l.types)
	if len(l.types) == 0 {
		taken = "its types unchanged (a new limit: none, only tasks.Acquire takes from it)"
	}
	return fmt.Sprintf("rate limit %s: %d per %s, %s", name, l.n, l.per, taken),
		tasks.SetRateLimit(ctx, db, l.name, l.n, l.per, l.types, l.opts...)
}

func typeNames(types []tasks.Type) string {
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = oneLine(string(t))
	}
	return strings.Join(names, ", ")
}

// limitsJSON is what `limit --json` prints.
type limitsJSON struct {
	Types      []typeControlsJSON `json:"types"`
	KeySpaces  []keySpaceJSON     `json:"key_spaces"`
	RateLimits []rateLimitJSON    `json:"rate_limits"`
}

type typeControlsJSON struct {
	Type       tasks.Type `json:"type"`
	PausedAt   *time.Time `json:"paused_at"`
	PausedBy   *string    `json:"paused_by"`
	MaxRunning *int       `json:"max_running"`
	Running    int        `json:"running"`
	Ready      int        `json:"ready"`
	Waiting    int        `json:"waiting"`
	KeySpace   *string    `json:"key_space"`
	RateLimit  *string    `json:"rate_limit"`
}

type keySpaceJSON struct {
	Name        string       `json:"name"`
	MaxRunning  int          `json:"max_running"`
	Types       []tasks.Type `json:"types"`
	KeysAtLimit int          `json:"keys_at_limit"`
	Keys        []keyJSON    `json:"keys"`
}

type keyJSON struct {
	Key     string `json:"key"`
	Running int    `json:"running"`
	Waiting int    `json:"waiting"`
}

type rateLimitJSON struct {
	Name   string       `json:"name"`
	Rate   int          `json:"rate"`
	PerSec float64      `json:"per_sec"`
	Tokens float64      `json:"tokens"`
	Types  []tasks.Type `json:"types"`
}

// showLimits prints every control.
func (a *app) showLimits(ctx context.Context, asJSON bool) error {
	var c tasks.FlowControls
	var now time.Time
	err := a.readSnapshot(ctx, func(tx pgx.Tx, txNow time.Time) (err error) {
		now = txNow
		c, err = tasks.Controls(ctx, tx)
		return err
	})
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(a.stdout, toLimitsJSON(c))
	}
	return printLimits(a.stdout, c, now)
}

func toLimitsJSON(c tasks.FlowControls) limitsJSON {
	j := limitsJSON{Types: []typeControlsJSON{}, KeySpaces: []keySpaceJSON{}, RateLimits: []rateLimitJSON{}}
	for _, t := range c.Types {
		o := typeControlsJSON{Type: t.Type, PausedAt: t.PausedAt, Running: t.Running, Ready: t.Ready, Waiting: t.Waiting,
			KeySpace: optional(t.KeySpace), RateLimit: optional(t.RateLimit)}
		if t.Paused() {
			o.PausedBy = optional(t.PausedBy)
		}
		if t.MaxRunning > 0 {
			o.MaxRunning = &t.MaxRunning
		}
		j.Types = append(j.Types, o)
	}
	for _, s := range c.KeySpaces {
		o := keySpaceJSON{Name: s.Name, MaxRunning: s.MaxRunning, Types: s.Types, KeysAtLimit: s.KeysAtLimit, Keys: []keyJSON{}}
		for _, k := range s.Keys {
			o.Keys = append(o.Keys, keyJSON{Key: k.Key, Running: k.Running, Waiting: k.Waiting})
		}
		j.KeySpaces = append(j.KeySpaces, o)
	}
	for _, r := range c.RateLimits {
		j.RateLimits = append(j.RateLimits, rateLimitJSON{Name: r.Name, Rate: r.Rate, PerSec: r.Per.Seconds(), Tokens: r.Tokens, Types: r.Types})
	}
	return j
}

// printLimits prints every control for people.
func printLimits(w io.Writer, c tasks.FlowControls, now time.Time) error {
	if len(c.Types) == 0 && len(c.KeySpaces) == 0 && len(c.RateLimits) == 0 {
		fmt.Fprintln(w, "no limits: no type is paused or limited, no key space, no rate limit")
		return nil
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return oneLine(s)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(c.Types) > 0 {
		fmt.Fprintln(tw, "TYPE\tPAUSED\tMAX_RUNNING\tRUNNING\tREADY\tWAITING\tKEY_SPACE\tRATE_LIMIT")
		for _, t := range c.Types {
			paused, max := "-", "-"
			if t.Paused() {
				paused = relative(t.PausedAt, now) + " by " + oneLine(t.PausedBy)
			}
			if t.MaxRunning > 0 {
				max = strconv.Itoa(t.MaxRunning)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", oneLine(string(t.Type)), paused, max, t.Running,
				t.Ready, t.Waiting, dash(t.KeySpace), dash(t.RateLimit))
		}
	}
	if len(c.KeySpaces) > 0 {
		if len(c.Types) > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw, "KEY_SPACE\tMAX_PER_KEY\tKEYS_AT_LIMIT\tTYPES")
		for _, s := range c.KeySpaces {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", oneLine(s.Name), s.MaxRunning, s.KeysAtLimit, typeNames(s.Types))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range c.KeySpaces {
		for _, k := range s.Keys {
			fmt.Fprintf(w, "  %s key %s: %d running, %d waiting\n", oneLine(s.Name), oneLine(k.Key), k.Running, k.Waiting)
		}
		if more := s.KeysAtLimit - len(s.Keys); more > 0 {
			fmt.Fprintf(w, "  %s: %s more at the limit\n", oneLine(s.Name), plural(more, "key"))
		}
	}
	if len(c.RateLimits) > 0 {
		if len(c.Types) > 0 || len(c.KeySpaces) > 0 {
			fmt.Fprintln(w)
		}
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RATE_LIMIT\tRATE\tPER\tTOKENS\tTYPES")
		for _, r := range c.RateLimits {
			fmt.Fprintf(tw, "%s\t%d\t%v\t%.1f\t%s\n", oneLine(r.Name), r.Rate, r.Per, r.Tokens, dash(typeNames(r.Types)))
		}
		return tw.Flush()
	}
	return nil
}

// showControlChanges prints the last n changes of the controls.
func (a *app) showControlChanges(ctx context.Context, n int, asJSON bool) error {
	var changes []tasks.ControlChange
	err := a.withConn(ctx, func(conn *pgx.Conn) (err error) {
		changes, err = tasks.ControlChanges(ctx, conn, n)
		return err
	})
	if err != nil {
		return err
	}
	if asJSON {
		type changeJSON struct {
			At      time.Time `json:"at"`
			Action  string    `json:"action"`
			Subject string    `json:"subject"`
			Detail  string    `json:"detail"`
			By      string    `json:"by"`
		}
		out := make([]changeJSON, len(changes))
		for i, c := range changes {
			out[i] = changeJSON(c)
		}
		return writeJSON(a.stdout, out)
	}
	if len(changes) == 0 {
		fmt.Fprintln(a.stdout, "no changes of the controls recorded")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tACTION\tSUBJECT\tDETAIL\tBY")
	for _, c := range changes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.At.UTC().Format(time.RFC3339), c.Action, c.Subject, c.Detail, c.By)
	}
	return tw.Flush()
}

// typesLeavingSpace returns the types of key space space that are not among
// types: those setting the space with types takes out of it.
func typesLeavingSpace(ctx context.Context, db tasks.DB, space string, types []tasks.Type) ([]tasks.Type, error) {
	c, err := tasks.Controls(ctx, db)
	if err != nil {
		return nil, err
	}
	var left []tasks.Type
	for _, k := range c.KeySpaces {
		if k.Name != space {
			continue
		}
		for _, t := range k.Types {
			if !slices.Contains(types, t) {
				left = append(left, t)
			}
		}
	}
	return left, nil
}
