package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/executor"
	"github.com/corotask/corotask/tasks"
)

// The task types of the workload.
const (
	// TypeRoot is a tree's root, created by the harness: it spawns nodes and
	// ends once every child has ended.
	TypeRoot tasks.Type = "fault.root"
	// TypeNode is an inner task: it may spawn children, sends SiblingMessages
	// numbered messages to each sibling, and ends once it has received as
	// many from each sibling and every child has ended.
	TypeNode tasks.Type = "fault.node"
	// TypeDoomed always fails; after DoomedMaxFailures failed polls it ends
	// as failed, and its parent gets a completion saying so.
	TypeDoomed tasks.Type = "fault.doomed"
	// TypeVictim sleeps and polls for ever until the harness cancels it.
	TypeVictim tasks.Type = "fault.victim"
)

// Workload constants.
const (
	// SiblingMessages is how many messages a node sends to each sibling.
	SiblingMessages = 3
	// DoomedMaxFailures is the MaxFailures of TypeDoomed.
	DoomedMaxFailures = 3
	// maxDepth bounds the trees: the root is at depth 0.
	maxDepth = 3
)

// spawnChance is the chance that a node at a depth spawns children.
var spawnChance = [maxDepth]float64{1, 0.6, 0.3}

// Msg is the message type of the workload. Every message the workload sends
// has a unique ID; a child's result (the body of its completion message) is
// a Msg too, with ID "done-<child uuid>".
type Msg struct {
	ID       string     `json:"id"`
	Kind     string     `json:"kind"` // intro, sib, ext, result
	Seq      int        `json:"seq,omitempty"`
	Siblings []tasks.ID `json:"siblings,omitempty"`
	Pad      string     `json:"pad,omitempty"`
	// Trap, when trapDecodePanic, makes a worker's decoder panic half the
	// times it decodes the message.
	Trap string `json:"trap,omitempty"`
}

// trapDecodePanic is the marker of a message whose decoding may panic.
const trapDecodePanic = "decode-panic"

// trapWorker is the worker of this process, if it runs one: the decoder
// draws its chances and logs its panics there. The harness's own process
// has none, and never panics.
var trapWorker atomic.Pointer[Worker]

// trapPanics counts, per trapped message, the panics its decoding made in
// this process.
var trapPanics sync.Map // message ID -> *atomic.Int32

// trapPanicsMax is the most panics a trapped message makes in one process.
// Each trapped message in a poll's window panics half the time, so that a
// window of k of them decodes whole once in 2^k polls: a task whose inbox
// gathered a dozen while it could not run (a shard moved with its writes
// blocked, say) would fail for hours, each failure drawing again.
const trapPanicsMax = 2

// UnmarshalJSON decodes a Msg, and panics on a trapped one half the time,
// up to trapPanicsMax times in a process: the executor must turn that into
// a failed poll, and the message must be seen by a later poll all the same.
func (m *Msg) UnmarshalJSON(b []byte) error {
	type plain Msg
	if err := json.Unmarshal(b, (*plain)(m)); err != nil {
		return err
	}
	if w := trapWorker.Load(); w != nil && m.Trap == trapDecodePanic && w.float() < 0.5 {
		n, _ := trapPanics.LoadOrStore(m.ID, new(atomic.Int32))
		if n.(*atomic.Int32).Add(1) <= trapPanicsMax {
			w.attempt("PD", "", tasks.ID{})
			panic("injected panic in Msg.UnmarshalJSON, message " + m.ID)
		}
	}
	return nil
}

// poisonBody is the body of a poison message: it has the ledger ID of a
// message, but does not decode as a Msg.
func poisonBody(id string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"id": id, "kind": KindPoison, "seq": "not a number"})
	return b
}

// poisonID returns the ledger ID a poison message carries, if any.
func poisonID(raw json.RawMessage) string {
	var p struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &p)
	return p.ID
}

// Message kinds.
const (
	KindIntro  = "intro"  // parent to a new child: who its siblings are
	KindSib    = "sib"    // sibling to sibling, numbered 1..SiblingMessages
	KindExt    = "ext"    // from the harness, outside any task
	KindResult = "result" // a child's result, in its completion message
	KindPoison = "poison" // from the harness, a body that does not decode as Msg
)

// CompletionID is the ledger ID of the completion message child sends its
// parent when it ends.
func CompletionID(child tasks.ID) string { return "done-" + child.UUID() }

// NodeState is the state of TypeRoot and TypeNode tasks.
type NodeState struct {
	// Polls counts this task's committed polls; the ledger checks that
	// committed polls number 1, 2, 3... with no gap and no repeat.
	Polls int
	Depth int
	// Root is the tree's root (zero in the root itself): its UUID is the
	// limit key, in KeySpaceTree, of the tree's nodes and doomed tasks.
	Root     tasks.ID
	Started  bool
	Intro    bool       // knows its siblings
	Siblings []tasks.ID // the other nodes spawned by the same poll of the parent
	Sent     int        // messages sent to each sibling so far
	Recv     map[string]int
	Kids     map[string]string // child uuid -> "", or how it ended
	Ext      int               // messages from the harness consumed
}

// VictimState is the state of TypeVictim tasks.
type VictimState struct{ Polls int }

// record is what one poll writes to the ledger when it commits.
type record struct {
	poll     tasks.ID
	started  time.Time
	consumed []string
	sentID   []string
	sentTo   []tasks.ID
	sentKind []string
	anomaly  []string
}

func (r *record) sent(id string, to tasks.ID, kind string) {
	r.sentID, r.sentTo, r.sentKind = append(r.sentID, id), append(r.sentTo, to), append(r.sentKind, kind)
}

func (r *record) anomalyf(format string, args ...any) {
	r.anomaly = append(r.anomaly, fmt.Sprintf(format, args...))
}

// commit asks for r to be written in the poll's commit transaction. It is
// also where an armed commit-kill fires: the task's row is updated, the
// transaction is open, and the process dies.
func commitRecord[S any](w *Worker, t *executor.Task[S, Msg], seq int, r *record) {
	tried := false // this commit's first attempt is over
	t.OnCommit(func(ctx context.Context, tx pgx.Tx) error {
		w.maybeDie(killInCommit)
		first := !tried
		tried = true
		if r := w.float(); r < w.cfg.OnCommitPanicRate {
			w.attempt("PC", t.Type, t.ID)
			panic("injected panic in OnCommit")
		} else if first && r < w.cfg.OnCommitPanicRate+w.cfg.LockWaitRate {
			if err := w.lockWait(ctx, tx, t.Type, t.ID); err != nil {
				return err
			}
		}
		consumed := r.consumed
		if consumed == nil {
			consumed = []string{}
		}
		_, err := tx.Exec(ctx, recordSQL, r.poll, t.ID, seq, w.cfg.Name, r.started,
			consumed, nonNil(r.sentID), nonNilIDs(r.sentTo), nonNil(r.sentKind), nonNil(r.anomaly))
		return err
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilIDs(s []tasks.ID) []tasks.ID {
	if s == nil {
		return []tasks.ID{}
	}
	return s
}

// errInjected is the error of a poll that fails on purpose.
var errInjected = errors.New("injected failure")

// chaos is what every poll of the workload goes through first: it is logged
// as an attempt, and may die (if a kill is armed), fail, panic or stall.
func (w *Worker) chaos(typ tasks.Type, id tasks.ID) error {
	w.attempt("A", typ, id)
	w.maybeDie(killInPoll)
	switch r := w.float(); {
	case r < w.cfg.ErrorRate:
		w.attempt("E", typ, id)
		return errInjected
	case r < w.cfg.ErrorRate+w.cfg.PanicRate:
		w.attempt("P", typ, id)
		panic("injected panic")
	case r < w.cfg.ErrorRate+w.cfg.PanicRate+w.cfg.StallRate:
		// A stall past the heartbeat timeout that ignores its context, then
		// goes on to commit: the heartbeat keeper keeps the claim alive, unless
		// the whole process is frozen meanwhile (then the fence must refuse the
		// commit).
		w.attempt("S", typ, id)
		time.Sleep(w.cfg.Stall)
	}
	return nil
}

// pollNode is the poller of TypeRoot and TypeNode.
func (w *Worker) pollNode(ctx context.Context, t *executor.Task[NodeState, Msg]) (executor.Action, error) {
	r := &record{poll: tasks.NewID(), started: time.Now()}
	if err := w.chaos(t.Type, t.ID); err != nil {
		return executor.Action{}, err
	}
	s := &t.State
	s.Polls++
	if s.Recv == nil {
		s.Recv = map[string]int{}
	}
	if s.Kids == nil {
		s.Kids = map[string]string{}
	}
	if !s.Started {
		s.Started = true
		if t.Parent.IsZero() {
			s.Intro = true // a root has no siblings
		}
		if s.Depth < maxDepth && w.float() < spawnChance[s.Depth] {
			root := s.Root
			if root.IsZero() {
				root = t.ID
			}
			n := 2 + w.intn(2)
			nodes := make([]tasks.ID, n)
			for i := range nodes {
				spec := tasks.Spec{Type: TypeNode, State: NodeState{Depth: s.Depth + 1, Root: root}, LimitKey: root.UUID()}
				if w.float() < w.cfg.PriorityRate {
					spec.Priority = 1 + w.intn(3)
				}
				nodes[i] = t.SpawnSpec(spec)
				s.Kids[nodes[i].UUID()] = ""
			}
			for _, kid := range nodes {
				m := Msg{ID: "intro-" + kid.UUID(), Kind: KindIntro, Siblings: nodes}
				t.Send(kid, m)
				r.sent(m.ID, kid, KindIntro)
			}
			if w.float() < 0.3 {
				s.Kids[t.SpawnSpec(tasks.Spec{Type: TypeDoomed, LimitKey: root.UUID()}).UUID()] = ""
			}
			if w.float() < 0.3 {
				s.Kids[t.Spawn(TypeVictim, nil, nil).UUID()] = ""
			}
		}
	}
	for {
		m, ok := t.Inbox.Pop()
		if !ok {
			break
		}
		switch {
		case m.DecodeErr != nil && !m.Done:
			// A poison message: dropped, and counted as consumed.
			if id := poisonID(m.Raw); id != "" {
				r.consumed = append(r.consumed, id)
			} else {
				r.anomalyf("undecodable message without an id from %s: %v", m.From, m.DecodeErr)
			}
		case m.Done:
			id := CompletionID(m.From)
			r.consumed = append(r.consumed, id)
			outcome, mine := s.Kids[m.From.UUID()]
			switch {
			case !mine:
				r.anomalyf("completion from %s, not a child", m.From)
				continue
			case outcome != "":
				r.anomalyf("second completion from child %s", m.From)
				continue
			}
			switch {
			case m.Err == "":
				outcome = "done"
				if m.Body.ID != id || m.Body.Kind != KindResult {
					r.anomalyf("completion from %s carries %+v", m.From, m.Body)
				}
			case m.Err == "canceled":
				outcome = "canceled"
			default:
				outcome = "failed"
			}
			s.Kids[m.From.UUID()] = outcome
		case m.Body.ID == "":
			r.anomalyf("message without an id from %s: %+v", m.From, m.Body)
		default:
			r.consumed = append(r.consumed, m.Body.ID)
			switch m.Body.Kind {
			case KindIntro:
				if s.Intro {
					r.anomalyf("second intro %s", m.Body.ID)
				}
				s.Intro = true
				for _, sib := range m.Body.Siblings {
					if sib != t.ID {
						s.Siblings = append(s.Siblings, sib)
					}
				}
			case KindSib:
				from := m.From.UUID()
				if want := s.Recv[from] + 1; m.Body.Seq != want {
					r.anomalyf("message %s from %s: seq %d, want %d", m.Body.ID, m.From, m.Body.Seq, want)
				}
				s.Recv[from] = m.Body.Seq
			case KindExt:
				s.Ext++
				if m.Body.Trap != "" && m.Body.Trap != trapDecodePanic {
					r.anomalyf("message %s with trap %q", m.Body.ID, m.Body.Trap)
				}
			default:
				r.anomalyf("unexpected message %+v", m.Body)
			}
		}
	}
	// One round of messages to the siblings per poll.
	if s.Intro && len(s.Siblings) > 0 && s.Sent < SiblingMessages {
		s.Sent++
		for _, sib := range s.Siblings {
			m := Msg{ID: fmt.Sprintf("sib-%s-%s-%d", t.ID.UUID(), sib.UUID(), s.Sent), Kind: KindSib, Seq: s.Sent}
			if w.float() < 0.2 {
				m.Pad = w.pad()
			}
			t.Send(sib, m)
			r.sent(m.ID, sib, KindSib)
		}
	}
	w.maybeDie(killInPoll)
	commitRecord(w, t, s.Polls, r)
	if w.finished(s) {
		res := Msg{ID: CompletionID(t.ID), Kind: KindResult}
		if !t.Parent.IsZero() {
			r.sent(res.ID, t.Parent, KindResult)
		}
		return executor.DoneWith(res), nil
	}
	if s.Intro && len(s.Siblings) > 0 && s.Sent < SiblingMessages {
		return executor.Sleep(time.Duration(w.intn(30)) * time.Millisecond), nil
	}
	// Half the nodes wait for their children with AwaitChildren (woken by
	// the last one's end, a failed or canceled one, or any other message),
	// the others with Suspend (woken by each).
	if t.ID[15]%2 == 0 && waitsForKids(s) {
		return executor.AwaitChildren(), nil
	}
	return executor.Suspend(), nil
}

// waitsForKids reports whether a child of the node has not ended yet.
func waitsForKids(s *NodeState) bool {
	for _, outcome := range s.Kids {
		if outcome == "" {
			return true
		}
	}
	return false
}

// finished reports whether a node has done all it has to.
func (w *Worker) finished(s *NodeState) bool {
	if !s.Started || !s.Intro {
		return false
	}
	if len(s.Siblings) > 0 && s.Sent < SiblingMessages {
		return false
	}
	for _, sib := range s.Siblings {
		if s.Recv[sib.UUID()] < SiblingMessages {
			return false
		}
	}
	return !waitsForKids(s)
}

// pollDoomed is the poller of TypeDoomed: it always fails.
func (w *Worker) pollDoomed(ctx context.Context, t *executor.Task[struct{}, Msg]) (executor.Action, error) {
	w.attempt("D", t.Type, t.ID)
	w.maybeDie(killInPoll)
	return executor.Action{}, errors.New("doomed: this task always fails")
}

// pollVictim is the poller of TypeVictim: it sleeps and polls again until
// the harness cancels it.
func (w *Worker) pollVictim(ctx context.Context, t *executor.Task[VictimState, Msg]) (executor.Action, error) {
	r := &record{poll: tasks.NewID(), started: time.Now()}
	if err := w.chaos(t.Type, t.ID); err != nil {
		return executor.Action{}, err
	}
	t.State.Polls++
	for {
		m, ok := t.Inbox.Pop()
		if !ok {
			break
		}
		if m.DecodeErr != nil {
			r.consumed = append(r.consumed, poisonID(m.Raw))
			continue
		}
		r.consumed = append(r.consumed, m.Body.ID)
	}
	commitRecord(w, t, t.State.Polls, r)
	return executor.Sleep(time.Duration(50+w.intn(200)) * time.Millisecond), nil
}
