package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/inbox"
	"github.com/corotask/corotask/internal/testdb"
	_ "github.com/corotask/corotask/internal/testexit" // no race detector pause at exit
	"github.com/corotask/corotask/tasks"
)

// TestMain runs more tests at once than there are CPUs: they spend their time
// waiting for the database and for executors' timers.
func TestMain(m *testing.M) {
	os.Exit(testdb.Main(m, 8))
}

// lines records what the program prints, line by line, and lets a test wait
// for a line.
type lines struct {
	mu      sync.Mutex
	partial bytes.Buffer
	all     []string
	changed chan struct{}
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial.Write(p)
	for {
		line, err := l.partial.ReadString('\n')
		if err != nil {
			l.partial.WriteString(line) // incomplete: keep it for later
			break
		}
		l.all = append(l.all, strings.TrimSuffix(line, "\n"))
	}
	select {
	case l.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

// waitFor returns the submatches of the first line, from line number from
// on, that matches re.
func (l *lines) waitFor(t *testing.T, from int, re string) (int, []string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(testdb.Patience)
	for {
		l.mu.Lock()
		for i := from; i < len(l.all); i++ {
			if m := rx.FindStringSubmatch(l.all[i]); m != nil {
				l.mu.Unlock()
				return i, m
			}
		}
		l.mu.Unlock()
		select {
		case <-l.changed:
		case <-deadline:
			t.Fatalf("no line matches %q; output:\n%s", re, l.String())
		}
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// session is one run of the program.
type session struct {
	out    *lines
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, cfg config) *session {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testdb.Logger(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{out: &lines{changed: make(chan struct{}, 1)}, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- run(ctx, cfg, s.out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(testdb.Patience):
			t.Error("the program did not stop")
		}
	})
	return s
}

// wait waits for the program to return, and returns its output.
func (s *session) wait(t *testing.T) string {
	t.Helper()
	select {
	case err := <-s.done:
		require.NoError(t, err)
		s.done <- nil // for the cleanup
	case <-time.After(testdb.Patience):
		t.Fatalf("the program did not end; output:\n%s", s.out)
	}
	return s.out.String()
}

// order waits for the printed approve command, checks it, and returns the
// order's task ID and its number (its key).
func (s *session) order(t *testing.T) (tasks.ID, string) {
	t.Helper()
	_, m := s.out.waitFor(t, 0, `^(?:order|waiting for order) (PO-\d{6}) \(task (\S+)[,)]`)
	id, err := tasks.ParseID(m[2])
	require.NoError(t, err)
	number := m[1]
	s.out.waitFor(t, 0, `^    corotask --database-url \S+ send --type approval.order --key `+number+` '\{"approve":true\}'$`)
	s.out.waitFor(t, 0, `^    corotask --database-url \S+ send --type approval.order --key `+number+` '\{"approve":false,"reason":"too expensive"\}'$`)
	return id, number
}

// decide sends body to the order with number, as a webhook that knows only
// the number does.
func decide(t *testing.T, db tasks.DB, number string, body any) tasks.ID {
	t.Helper()
	id, err := inbox.SendToKey(context.Background(), db, orderType, number, body, nil)
	require.NoError(t, err)
	return id
}

func result(t *testing.T, db tasks.DB, id tasks.ID) outcome {
	t.Helper()
	task, err := tasks.Get(context.Background(), db, id)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status)
	var res outcome
	require.NoError(t, json.Unmarshal(task.Result, &res))
	return res
}

func TestApproved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	s := start(t, config{DatabaseURL: url, Item: "a desk", Timeout: time.Hour, Remind: 20 * time.Millisecond})
	id, number := s.order(t)
	// The order reminds while it waits.
	s.out.waitFor(t, 0, fmt.Sprintf(`^reminder 1: order %s for a desk waits for approval \([0-9hms]+ left\)$`, number))
	s.out.waitFor(t, 0, `^reminder 2: `)
	// A message that is not a decision is ignored; the task goes on.
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, "yes please"))
	require.Equal(t, id, decide(t, db, number, json.RawMessage(`{"approve":true}`)))
	out := s.wait(t)

	res := result(t, db, id)
	require.Equal(t, "approved", res.Status)
	require.Equal(t, "a desk", res.Item)
	require.GreaterOrEqual(t, res.Reminders, 2)
	require.Equal(t, res.Reminders, strings.Count(out, "\nreminder "), "one line per reminder:\n%s", out)
	require.True(t, strings.HasSuffix(out, fmt.Sprintf("\norder %s approved (after %d reminders)", number, res.Reminders)), out)
}

func TestRejected(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	s := start(t, config{DatabaseURL: url, Item: "a yacht", Timeout: time.Hour, Remind: time.Hour})
	id, number := s.order(t)
	decide(t, db, number, map[string]any{"approve": false, "reason": "too expensive"})
	out := s.wait(t)

	require.Equal(t, outcome{Status: "rejected", Item: "a yacht", Reason: "too expensive"}, result(t, db, id))
	require.True(t, strings.HasSuffix(out, fmt.Sprintf("\norder %s rejected (after 0 reminders): too expensive", number)), out)
}

// With -strict, a message that is not a decision fails every poll until it
// is dropped; then a decision ends the order.
func TestStrictPoisonMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	s := start(t, config{DatabaseURL: url, Item: "a lamp", Timeout: time.Hour, Remind: time.Hour, Strict: true})
	id, _ := s.order(t)
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, json.RawMessage(`{"approve":"yes"}`)))
	require.Eventually(t, func() bool {
		task, err := tasks.Get(ctx, db, id)
		require.NoError(t, err)
		return task.Status == tasks.StatusRetrying
	}, testdb.Patience, 10*time.Millisecond)
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.Contains(t, task.LastError, `message {"approve": "yes"} is not a decision`)

	_, err = tasks.DropMessage(ctx, db, id, 1, testdb.InboxDigest(t, db, id, 1))
	require.NoError(t, err)
	require.NoError(t, tasks.ResetFailures(ctx, db, id))
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, json.RawMessage(`{"approve":true}`)))
	s.wait(t)
	require.Equal(t, "approved", result(t, db, id).Status)
}

func TestTimedOut(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	s := start(t, config{DatabaseURL: url, Item: "a chair", Timeout: 500 * time.Millisecond, Remind: 100 * time.Millisecond})
	id, number := s.order(t)
	out := s.wait(t)

	res := result(t, db, id)
	require.Equal(t, "timed out", res.Status)
	require.Equal(t, res.Reminders, strings.Count(out, "\nreminder "), "one line per reminder:\n%s", out)
	require.Contains(t, out, fmt.Sprintf("\norder %s timed out (after %s)", number, plural(res.Reminders, "reminder")))

	// Ended orders take no more messages: a late decision is refused.
	err := inbox.Send(context.Background(), db, id, tasks.ID{}, json.RawMessage(`{"approve":true}`))
	require.ErrorIs(t, err, tasks.ErrEnded)
}

// An order outlives the program: stopped while it waits, it is waited for
// again with -order.
func TestResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	first := start(t, config{DatabaseURL: url, Item: "a lamp", Timeout: time.Hour, Remind: time.Hour})
	id, number := first.order(t)
	first.cancel()
	out := first.wait(t)
	require.Contains(t, out, fmt.Sprintf("\nstopped; order %s still waits: `go run ./examples/approval -order %s` waits for it again", number, id))
	task, err := tasks.Get(ctx, db, id)
	require.NoError(t, err)
	require.False(t, task.Status.Ended())

	second := start(t, config{DatabaseURL: url, Order: id.String(), Timeout: time.Hour, Remind: time.Hour})
	again, _ := second.order(t)
	require.Equal(t, id, again)
	decide(t, db, number, json.RawMessage(`{"approve":true}`))
	out = second.wait(t)
	require.True(t, strings.HasPrefix(out, fmt.Sprintf("waiting for order %s (task %s, ", number, id)), out)
	require.Equal(t, "approved", result(t, db, id).Status)
}

// An order made without the program (corotask create) gets its deadline from
// its first poll.
func TestOrderCreatedElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: orderType, State: json.RawMessage(`{"item": "a chair"}`)})
	require.NoError(t, err)
	s := start(t, config{DatabaseURL: url, Order: id.String(), Timeout: 200 * time.Millisecond, Remind: time.Hour})
	out := s.wait(t)
	require.Contains(t, out, fmt.Sprintf("\norder %s timed out (after 0 reminders)", id))
	res := result(t, db, id)
	require.Equal(t, outcome{Status: "timed out", Item: "a chair"}, res)
}

func TestPrintedCommandNamesExplicitDatabase(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	s := start(t, config{DatabaseURL: url, Item: "a pen", Timeout: time.Hour, Remind: time.Hour})
	s.out.waitFor(t, 0, `^    corotask --database-url `+regexp.QuoteMeta(shellQuote(url))+` send --type approval.order --key PO-\d{6} '\{"approve":true\}'$`)
}

// A database with a password gets a command without it, and a note that
// says where the CLI takes it from.
func TestPrintedCommandHidesPassword(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testdb.URL(t))
	require.NoError(t, err)
	if _, ok := u.User.Password(); !ok {
		// The server ignores a password it does not ask for (trust).
		u.User = url.UserPassword(u.User.Username(), "s3cret")
	}
	s := start(t, config{DatabaseURL: u.String(), Item: "a pen", Timeout: time.Hour, Remind: time.Hour})
	u.User = url.User(u.User.Username())
	s.out.waitFor(t, 0, `^    corotask --database-url `+regexp.QuoteMeta(shellQuote(u.String()))+` send --type approval.order --key PO-\d{6} '\{"approve":true\}'$`)
	s.out.waitFor(t, 0, `^\(the password is not shown: give it in PGPASSWORD or ~/.pgpass\)$`)
	require.NotContains(t, s.out.String(), "s3cret")
}

func TestParseDecision(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"approve":true}`, `{"approve": false, "reason": "no"}`} {
		_, err := parseDecision(json.RawMessage(body))
		require.NoError(t, err, body)
	}
	for _, body := range []string{`"yes"`, `{}`, `{"approve":"yes"}`, `{"approve":true,"amount":3}`, `null`} {
		_, err := parseDecision(json.RawMessage(body))
		require.Error(t, err, body)
	}
}

var _ io.Writer = (*lines)(nil)

// A canceled order ends the program with one line that says so.
func TestCanceled(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	s := start(t, config{DatabaseURL: url, Item: "a lamp", Timeout: time.Hour, Remind: time.Hour})
	id, number := s.order(t)
	require.NoError(t, tasks.Cancel(context.Background(), db, id))
	out := s.wait(t)
	require.True(t, strings.HasSuffix(out, fmt.Sprintf("\norder %s canceled", number)), "%q", out)
}

// An order created without a number (corotask create without --key) is
// named by its task ID, and decided by it.
func TestOrderWithoutNumber(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	id, err := tasks.Create(ctx, db, tasks.Spec{Type: orderType, State: json.RawMessage(`{"item": "a rug"}`)})
	require.NoError(t, err)
	s := start(t, config{DatabaseURL: url, Order: id.String(), Timeout: time.Hour, Remind: time.Hour})
	s.out.waitFor(t, 0, fmt.Sprintf(`^    corotask --database-url \S+ send %s '\{"approve":true\}'$`, id))
	require.NoError(t, inbox.Send(ctx, db, id, tasks.ID{}, json.RawMessage(`{"approve":true}`)))
	out := s.wait(t)
	require.True(t, strings.HasPrefix(out, fmt.Sprintf("waiting for order %s (", id)), out)
	require.True(t, strings.HasSuffix(out, fmt.Sprintf("\norder %s approved (after 0 reminders)", id)), out)
}

// -number names the order; a number a waiting order has is refused.
func TestNumber(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	s := start(t, config{DatabaseURL: url, Item: "a desk", Number: "PO-000042", Timeout: time.Hour, Remind: time.Hour})
	id, number := s.order(t)
	require.Equal(t, "PO-000042", number)

	var out bytes.Buffer
	err := run(context.Background(), config{DatabaseURL: url, Item: "a chair", Number: "PO-000042", Timeout: time.Hour, Remind: time.Hour,
		Logger: testdb.Logger(t)}, &out)
	require.ErrorIs(t, err, tasks.ErrExists)
	require.ErrorContains(t, err, "create order PO-000042")
	require.ErrorContains(t, err, id.String())

	decide(t, db, number, json.RawMessage(`{"approve":true}`))
	s.wait(t)
	require.Equal(t, "approved", result(t, db, id).Status)
}

// A decision sent by number when no order with it waits (one decided
// already, or none made) creates a task without an item, which its poll
// ends as "no such order".
func TestDecisionForNoOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	db := testdb.Pool(t, url)
	s := start(t, config{DatabaseURL: url, Item: "a desk", Timeout: time.Hour, Remind: time.Hour})
	s.order(t) // the program's executor runs
	stray := decide(t, db, "PO-999999x", json.RawMessage(`{"approve":true}`))
	waitCtx, cancel := context.WithTimeout(ctx, testdb.Patience)
	defer cancel()
	task, err := tasks.Wait(waitCtx, db, stray)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusDone, task.Status)
	require.Equal(t, outcome{Status: "no such order"}, result(t, db, stray))
}
