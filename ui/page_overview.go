package ui

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

// overview is the overview page's data.
type overview struct {
	Types     []string
	Counts    map[string]map[string]count // type, status
	Totals    map[string]count            // status
	Total     count
	Activity  []*typeActivity
	Failing   []taskRow
	Failed    []taskRow
	Estimated bool
	// Unserved are the types of ready tasks that no live executor serves.
	Unserved []string
	// Paused are the paused types, by name: the overview marks them, and
	// offers to resume them.
	Paused map[string]pausedType
	// Executors is how many executors are live, and Slots their summed
	// concurrency; Claims how many tasks they hold.
	Executors, Slots, Claims int
}

// Count returns the count of a type (all types for "") in a status.
func (o *overview) Count(typ string, status tasks.Status) count {
	if typ == "" {
		return o.Totals[string(status)]
	}
	return o.Counts[typ][string(status)]
}

// PausedAt returns since when type typ is paused; nil when it is not.
func (o *overview) PausedAt(typ string) *time.Time {
	if p, ok := o.Paused[typ]; ok {
		return p.At
	}
	return nil
}

// IsPaused says whether type typ is paused.
func (o *overview) IsPaused(typ string) bool { return o.PausedAt(typ) != nil }

// PausedBy returns the role that paused type typ.
func (o *overview) PausedBy(typ string) string { return o.Paused[typ].By }

func loadOverview(ctx context.Context, h *Handler, r *http.Request, tx pgx.Tx, v *view) error {
	rows, err := tableRows(ctx, tx)
	if err != nil {
		return err
	}
	pct := samplePercent(rows, h.cfg.CountThreshold)
	counts, err := countTasks(ctx, tx, "", pct)
	if err != nil {
		return err
	}
	o := &overview{Counts: make(map[string]map[string]count), Totals: make(map[string]count), Estimated: pct > 0}
	for _, c := range counts {
		if o.Counts[c.Type] == nil {
			o.Counts[c.Type] = make(map[string]count)
			o.Types = append(o.Types, c.Type)
		}
		o.Counts[c.Type][c.Status] = c
		t := o.Totals[c.Status]
		t.N, t.Estimated = t.N+c.N, t.Estimated || c.Estimated
		o.Totals[c.Status] = t
		o.Total.N, o.Total.Estimated = o.Total.N+c.N, o.Total.Estimated || c.Estimated
	}
	acts, err := activity(ctx, tx, pct)
	if err != nil {
		return err
	}
	for typ, a := range acts {
		if o.Counts[typ] == nil {
			o.Counts[typ] = make(map[string]count)
			o.Types = append(o.Types, typ)
		}
		o.Activity = append(o.Activity, a)
	}
	slices.Sort(o.Types)
	slices.SortFunc(o.Activity, func(a, b *typeActivity) int { return strings.Compare(a.Type, b.Type) })
	if o.Failing, err = failingTasks(ctx, tx, 10); err != nil {
		return err
	}
	if o.Failed, err = recentlyFailed(ctx, tx, 10); err != nil {
		return err
	}
	if o.Unserved, err = unservedTypes(ctx, tx); err != nil {
		return err
	}
	if o.Paused, err = pausedTypes(ctx, tx); err != nil {
		return err
	}
	if o.Executors, o.Slots, o.Claims, err = liveExecutors(ctx, tx); err != nil {
		return err
	}
	v.Title, v.P = "Overview · corotask", o
	return nil
}
