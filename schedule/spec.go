package schedule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/corotask/corotask/tasks"
)

// Type is the task type of schedules.
const Type tasks.Type = "corotask.schedule"

// Missed is what a schedule does with the slots it missed (see the package
// documentation).
type Missed string

// The missed-run policies.
const (
	MissedSkip Missed = "skip" // run none of them
	MissedOnce Missed = "once" // run the latest one (the default)
	MissedAll  Missed = "all"  // run each, at most MaxMissed (the latest)
)

// Limits.
const (
	// DefaultMaxMissed is MaxMissed when zero.
	DefaultMaxMissed = 100
	// MaxSlotsAtOnce bounds MaxMissed, and how many slots a Backfill runs.
	MaxSlotsAtOnce = 1000
	// MaxNameLen is the longest schedule name, in bytes: the name and the
	// slot's time make each child's key (see tasks.MaxKeyLen).
	MaxNameLen = 128
)

// Spec is what a schedule runs, and when.
type Spec struct {
	// Name names the schedule: 1 to MaxNameLen letters, digits and "._:/-".
	Name string `json:"name"`
	// Type is the type of the tasks it creates; a type no executor serves
	// is allowed (its tasks show as unserved).
	Type tasks.Type `json:"type"`
	// State is the initial state of each task created (JSON; nil: the
	// poller's zero value).
	State json.RawMessage `json:"state,omitempty"`
	// Cron is when it runs (see ParseCron), in TimeZone (a
	// time.LoadLocation name; "": UTC).
	Cron     string `json:"cron"`
	TimeZone string `json:"time_zone,omitempty"`
	// Missed is the missed-run policy ("": MissedOnce), and MaxMissed how
	// many missed slots MissedAll runs at most (0: DefaultMaxMissed).
	Missed    Missed `json:"missed,omitempty"`
	MaxMissed int    `json:"max_missed,omitempty"`
	// NoOverlap: a slot does not start while the previous slot's task lives.
	NoOverlap bool `json:"no_overlap,omitempty"`
}

// normalize checks s and returns it with its defaults filled in, or an
// error that names the field at fault.
func (s Spec) normalize() (Spec, error) {
	if err := validateName(s.Name); err != nil {
		return s, err
	}
	what := fmt.Sprintf("schedule %q", s.Name)
	if err := s.Type.Validate(); err != nil {
		return s, fmt.Errorf("%s: type: %w", what, err)
	}
	if len(s.State) > 0 {
		if !json.Valid(s.State) {
			return s, fmt.Errorf("%s: state is not valid JSON", what)
		}
		var b bytes.Buffer
		if err := json.Compact(&b, s.State); err != nil {
			return s, fmt.Errorf("%s: state: %w", what, err)
		}
		s.State = b.Bytes()
		if string(s.State) == "null" {
			s.State = nil
		}
	}
	cron, err := ParseCron(s.Cron, s.TimeZone)
	if err != nil {
		return s, fmt.Errorf("%s: %w", what, err)
	}
	if cron.Next(time.Now()).IsZero() {
		return s, fmt.Errorf("%s: cron %q has no slot in the next five years", what, s.Cron)
	}
	switch s.Missed {
	case "":
		s.Missed = MissedOnce
	case MissedSkip, MissedOnce, MissedAll:
	default:
		return s, fmt.Errorf("%s: invalid missed-run policy %q: want skip, once or all", what, s.Missed)
	}
	switch {
	case s.MaxMissed < 0 || s.MaxMissed > MaxSlotsAtOnce:
		return s, fmt.Errorf("%s: max missed %d is out of range 0-%d", what, s.MaxMissed, MaxSlotsAtOnce)
	case s.MaxMissed == 0:
		s.MaxMissed = DefaultMaxMissed
	}
	return s, nil
}

// validateName checks a schedule's name.
func validateName(name string) error {
	if name == "" {
		return fmt.Errorf("invalid schedule name: empty")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("invalid schedule name %.40q...: %d bytes, at most %d", name, len(name), MaxNameLen)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '/' || r == '-'
		if !ok {
			return fmt.Errorf("invalid schedule name %q: %q at byte %d (want letters, digits and ._:/-)", name, r, i)
		}
	}
	return nil
}
