package executor

import "errors"

// Fail marks err as a failure for good: a poll that returns it (wrapped or
// not) ends its task as failed at once, whatever its type's MaxFailures,
// as River's JobCancel and Temporal's non-retryable errors do:
//
//	if errors.Is(err, errCardDeclined) {
//		return executor.Action{}, executor.Fail(err)
//	}
//
// As for any failed poll, nothing of the poll is committed (its state,
// popped messages, spawns, sends and OnCommit work are discarded); the
// task's failures go up one last time, its last_error holds err's text, its
// history records a failed poll, and its parent, if any, receives a
// completion whose Err is that text, as when MaxFailures is reached. An
// OnCommit function may return Fail too: the poll fails as a whole, for
// good.
//
// A panic is never a failure for good (its *PanicError wraps nothing), nor
// is a poll that outlived its PollTimeout: both are retried with backoff
// until MaxFailures. Fail(nil) fails the task with the text "failed".
func Fail(err error) error {
	if err == nil {
		err = errFailNil
	}
	return &FailError{Err: err}
}

var errFailNil = errors.New("failed")

// FailError is the error Fail returns; errors.As finds it in a poll's error
// (TryPoll's included). Its text is the wrapped error's, unchanged: that is
// what last_error and the parent's completion hold.
type FailError struct {
	Err error
}

func (e *FailError) Error() string { return e.Err.Error() }

func (e *FailError) Unwrap() error { return e.Err }

// failsForGood reports whether a poll that failed with err ends its task
// now, whatever its type's MaxFailures.
func failsForGood(err error) bool {
	var f *FailError
	return errors.As(err, &f)
}
