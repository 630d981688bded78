// Package cause defines why a poll's context is canceled. Package executor
// exports these errors (executor.ErrClaimLost and the others), which is where
// pollers look for them; package heartbeat raises two of them.
package cause

import "errors"

var (
	ClaimLost    = errors.New("claim lost: the task was canceled or claimed by another executor")
	RenewTimeout = errors.New("claim expired: heartbeat could not be renewed within the heartbeat timeout")
	Canceled     = errors.New("task canceled")
	Shutdown     = errors.New("executor shutting down")
)
