package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/tasks"
)

var dropMessageCmd = &command{
	name:    "drop-message",
	args:    taskRefArgs + " POSITION",
	summary: "remove one message from a task's inbox",
	help: `Remove the message at POSITION (1: the oldest, as 'corotask show' numbers
them) from the inbox of task TASK, and print it: a message its poller cannot
handle (a poison message) stops failing the task. The message is kept in the
task's history (see 'corotask history --json'), from where it can be sent
again. A task an executor holds is refused (try again once its poll has
ended): its poll counts the inbox's positions. The action is recorded in the
task's history with your database role.

A position alone does not name a message: a poll that takes messages moves
the others up. --digest names the message to drop (its digest, as 'corotask
show' prints it): if the message at POSITION is another one by then, nothing
is dropped. Without --digest, nothing is dropped either: the command prints
the message at POSITION with its digest, and the command to drop it.`,
	example: `corotask drop-message 01JD7X3M5Q8R9S2T4V6W8Y0Z1A 1
corotask drop-message 01JD7X3M5Q8R9S2T4V6W8Y0Z1A 1 --digest 5f1c0a9b2d3e4f5061728394
corotask drop-message --type orders.checkout --key order-42 1`,
	flags: func(fs *flag.FlagSet) runFunc {
		digest := fs.String("digest", "", "the digest of the message to drop, `D`, as 'corotask show' prints it")
		ref := taskRefFlags(fs, "drop a message of")
		return func(ctx context.Context, a *app, args []string) error {
			rest, err := ref.parse(args, "POSITION")
			if err != nil {
				return err
			}
			pos, err := strconv.Atoi(rest[0])
			if err != nil || pos < 1 {
				return usagef("invalid POSITION %q: want 1 for the oldest message, 2 for the next, ...", rest[0])
			}
			id, err := a.resolveRef(ctx, ref)
			if err != nil {
				return err
			}
			if *digest == "" {
				return a.showMessage(ctx, id, pos)
			}
			if b, err := hex.DecodeString(*digest); err != nil || len(b) != 12 {
				return usagef("invalid --digest %q: want the 24 hex digits 'corotask show' prints for the message", *digest)
			}
			return a.withConn(ctx, func(conn *pgx.Conn) error {
				msg, err := tasks.DropMessage(ctx, conn, id, pos, *digest)
				if err != nil {
					if errors.Is(err, tasks.ErrNoMessage) {
						return fmt.Errorf("%w (see 'corotask show %s')", taskError(err), id)
					}
					return taskError(err)
				}
				fmt.Fprintf(a.stdout, "dropped message %d of %s: %s\n", pos, id, compactJSON(msg))
				return nil
			})
		}
	},
}

// showMessage prints the message at position pos of task id's inbox with its
// digest, and refuses to drop it: the digest names the message to drop.
func (a *app) showMessage(ctx context.Context, id tasks.ID, pos int) error {
	var (
		t   *tasks.Task
		now time.Time
	)
	err := a.readSnapshot(ctx, func(tx pgx.Tx, txNow time.Time) error {
		now = txNow
		var err error
		t, err = tasks.Get(ctx, tx, id)
		return err
	})
	if err != nil {
		return taskError(err)
	}
	// What drop_message would refuse, refused in its words.
	switch n := len(t.Inbox); {
	case t.Status.Ended():
		return fmt.Errorf("%w: %s", tasks.ErrEnded, id)
	case t.Status == tasks.StatusRunning || t.Status == tasks.StatusStale:
		return fmt.Errorf("%w: %s: an executor holds it: try again once its poll has ended", tasks.ErrRunning, id)
	case n == 0:
		return fmt.Errorf("%w: %s: position %d: its inbox is empty", tasks.ErrNoMessage, id, pos)
	case pos > n:
		return fmt.Errorf("%w: %s: position %d: its inbox holds %d message(s), at positions 1 to %d", tasks.ErrNoMessage, id, pos, n, n)
	}
	raw := t.Inbox[pos-1]
	m := decodeMessage(raw)
	from := "from outside"
	if !m.From.IsZero() {
		from = "from " + m.From.String()
	}
	d := tasks.MessageDigest(raw)
	fmt.Fprintf(a.stdout, "message %d of %s: %s, sent %s, digest %s\n  %s\n", pos, id, from, relative(m.SentAt, now), d, compactJSON(m.Body))
	return fmt.Errorf("nothing dropped: name the message by its digest to drop it: corotask drop-message %s %d --digest %s", id, pos, d)
}
