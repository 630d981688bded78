// Package corotasktest helps the tests of programs that use corotask: a
// fresh database per test, a driver that runs a workflow until nothing is
// left to poll, typed reads of a task's state and result, and a clock the
// test moves.
//
// # Unit tests of a poller
//
// executor.TryPoll runs one poll of a poller on a state and messages the
// test gives, as an executor would, and returns what the poll would commit
// (its action, new state, result, children, messages sent, OnCommit work) or
// its error, without a database:
//
//	res, err := executor.TryPoll(ctx, checkoutPoller{}, executor.TryInput[Cart, CartMsg]{
//		State:    Cart{Items: []string{"tea"}},
//		Messages: []inbox.Message[CartMsg]{{Body: CartMsg{Checkout: true}}},
//	})
//	require.NoError(t, err)
//	require.Equal(t, executor.DoneWith([]string{"tea"}), res.Action)
//
// # Tests of a workflow
//
// NewDB gives each test a migrated database of its own, dropped when the
// test ends, so tests run in parallel and never see each other's tasks.
// RunUntilIdle polls with an executor until no task is ready, committing
// every poll, one after another: a workflow of parents, children and
// messages runs to its end (or to where it sleeps) in the test's goroutine,
// with no background loop to wait for.
//
//	db := corotasktest.NewDB(t)
//	e := executor.MustNew(db, executor.Config{Logger: corotasktest.Logger(t)})
//	checkout := executor.Register(e, "shop.checkout", checkoutPoller{})
//	id, err := checkout.Create(ctx, db, Cart{Items: []string{"tea"}})
//	require.NoError(t, err)
//	_, err = corotasktest.RunUntilIdle(ctx, e)
//	require.NoError(t, err)
//	require.Equal(t, []string{"tea"}, corotasktest.Result[[]string](t, db, id))
//
// # The database
//
// The server is found as the corotask CLI and examples find it: the
// DATABASE_URL environment variable, else libpq's (PGHOST, PGPORT, PGUSER,
// ...), else a server on 127.0.0.1:5432 (user postgres), else a private
// cluster started from this machine's PostgreSQL binaries (initdb and pg_ctl
// on the PATH or under /usr/lib/postgresql/*/bin) and kept in the user's
// cache directory. The first test of a run makes a template database holding
// corotask's schema, kept on the server for later runs; each NewDB is a copy
// of it, which takes milliseconds. The databases of tests that a killed test
// process could not drop are dropped by a later run.
//
// Call Main from TestMain to drop the tests' databases in the background,
// so that a test's slot goes to the next test at once.
//
// # Time
//
// Clock is a clock the test moves. Given to NewDB (WithClock), it is the
// time of the database's readiness, claim expiry, Sleep, backoff and
// retention: what a poller sleeps for passes when the test advances it.
//
//	clock := corotasktest.NewClock()
//	db := corotasktest.NewDB(t, corotasktest.WithClock(clock))
//	... // a task that sleeps an hour
//	clock.Advance(time.Hour)
//	_, err = corotasktest.RunUntilIdle(ctx, e) // polls it
package corotasktest
