package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Without hooks, what the executor calls on its hot paths allocates nothing.
func TestNoHooksAllocateNothing(t *testing.T) {
	var hc hookCaller
	ctx := context.Background()
	c := &claimed{}
	out := &outcome{}
	req := &claimRequest{total: 1}
	err := errors.New("x")
	allocs := testing.AllocsPerRun(100, func() {
		start := hc.now()
		hc.claimDone(ctx, start, req, 1, nil)
		pctx := hc.pollStart(ctx, c)
		hc.pollReturned(c, out)
		hc.committed(c, committed)
		hc.failed(c, err, false, false, nil)
		hc.pollDone(pctx, c)
		hc.commitDone(ctx, start, 1, 0, &err)
	})
	require.Zero(t, allocs)
	require.Nil(t, c.hooked)
	require.Nil(t, hc.heartbeatHook())
	require.True(t, hc.now().Equal(time.Time{}))
}
