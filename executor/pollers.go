package executor

import (
	"errors"
	"fmt"
	"sync"

	"github.com/corotask/corotask/tasks"
)

// pollers holds the handlers registered by type, and whether Run runs:
// Register adds to it until Run starts, and every part reads it. Its mutex
// is taken last (under the slots' own), and held only to read or write it.
type pollers struct {
	mu      sync.Mutex
	byType  map[tasks.Type]handler
	running bool
}

func newPollers() *pollers { return &pollers{byType: map[tasks.Type]handler{}} }

// add registers h for typ, unless Run runs or typ has a handler already.
func (p *pollers) add(typ tasks.Type, h handler) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return fmt.Errorf("register %s: executor is already running", typ)
	}
	if _, ok := p.byType[typ]; ok {
		return fmt.Errorf("register %s: %w", typ, ErrDuplicateType)
	}
	p.byType[typ] = h
	return nil
}

// get returns typ's handler, nil if none.
func (p *pollers) get(typ tasks.Type) (handler, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.byType[typ]
	return h, ok
}

// each calls fn for every registered type, under the mutex.
func (p *pollers) each(fn func(tasks.Type, handler)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t, h := range p.byType {
		fn(t, h)
	}
}

// types returns the registered types.
func (p *pollers) types() []tasks.Type {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]tasks.Type, 0, len(p.byType))
	for t := range p.byType {
		out = append(out, t)
	}
	return out
}

// begin marks Run running, after check (under the mutex): it refuses a
// second Run and an executor without pollers.
func (p *pollers) begin(check func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return errors.New("executor: Run called twice")
	}
	if len(p.byType) == 0 {
		return errors.New("executor: no pollers registered")
	}
	if err := check(); err != nil {
		return err
	}
	p.running = true
	return nil
}

// end marks Run stopped.
func (p *pollers) end() {
	p.mu.Lock()
	p.running = false
	p.mu.Unlock()
}
