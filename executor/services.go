package executor

import (
	"context"
	"sync"
)

// service is one of Run's background loops: run returns soon after ctx
// ends. The heartbeats, the registration, the batch committers, the
// listener, retention and vacuum are each one.
type service interface {
	run(ctx context.Context)
}

// services runs Run's services, each in a goroutine of its own, from Run's
// start until its polls are done.
type services struct {
	ctx    context.Context // every service's: stop ends it
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startServices starts list, in its order, under a context of their own
// that parent's end does not end: stop does.
func startServices(parent context.Context, list []service) *services {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	g := &services{ctx: ctx, cancel: cancel}
	for _, s := range list {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			s.run(ctx)
		}()
	}
	return g
}

// stop ends every service's context at once, and returns once each has
// returned: the registration has then marked the executor stopped.
func (g *services) stop() {
	g.cancel()
	g.wg.Wait()
}
