package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SetKeyWindow sets how long a key of type typ stays reserved after its task
// has ended (done, failed or canceled): within d of that task's end, a task
// of typ with the same key is refused with ErrExists (an *ExistsError naming
// the ended task), by Create and CreateMany, the children of a poll and SQL's
// corotask.create_tasks alike, and inbox.SendToKey to that key is refused
// with ErrEnded, so that a producer that retries within the window does not
// start a second task. d of 0 removes typ's window; a negative d, or one
// below a microsecond, is refused. The window is kept in the database
// (corotask.key_windows), for every process and for SQL alike; tasks
// without a key are not concerned. Deleting the ended task (retention, see
// executor.Config.Retention) ends its window early.
func SetKeyWindow(ctx context.Context, db DB, typ Type, d time.Duration) error {
	if err := typ.Validate(); err != nil {
		return err
	}
	switch {
	case d == 0:
		if _, err := db.Exec(ctx, `DELETE FROM corotask.key_windows WHERE task_type = $1`, string(typ)); err != nil {
			return fmt.Errorf("remove key window of %s: %w", typ, err)
		}
		return nil
	case d < 0:
		return fmt.Errorf("key window of %s: %v is negative (0 removes it)", typ, d)
	case d < time.Microsecond:
		return fmt.Errorf("key window of %s: %v is below a microsecond", typ, d)
	}
	_, err := db.Exec(ctx, `INSERT INTO corotask.key_windows (task_type, keep)
		VALUES ($1, $2::bigint * interval '1 microsecond')
		ON CONFLICT (task_type) DO UPDATE SET keep = excluded.keep`, string(typ), d.Microseconds())
	if err != nil {
		return fmt.Errorf("set key window of %s: %w", typ, err)
	}
	return nil
}

// KeyWindow returns the key window of type typ (see SetKeyWindow): 0 when
// it has none.
func KeyWindow(ctx context.Context, db DB, typ Type) (time.Duration, error) {
	var us int64
	err := db.QueryRow(ctx, `SELECT (extract(epoch FROM keep) * 1000000)::bigint
		FROM corotask.key_windows WHERE task_type = $1`, string(typ)).Scan(&us)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("key window of %s: %w", typ, err)
	}
	return time.Duration(us) * time.Microsecond, nil
}
