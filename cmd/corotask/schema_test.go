package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/corotask/corotask/internal/testdb"
	corosql "github.com/corotask/corotask/sql"
)

// Every command that uses a database refuses a schema this build does not
// run on, with the words that say what to do, and exits 1; migrate does not.
func TestCommandsRefuseASchemaThatDoesNotFit(t *testing.T) {
	t.Parallel()
	build := corosql.BuildSchema()
	behind := fmt.Sprintf("corotask schema at migration %d, this build needs %d: run 'corotask migrate' or sql.Migrate with this build\n",
		build.Migration-1, build.Migration)
	ahead := fmt.Sprintf("corotask schema newer than this build (migration %d, this build knows %d; it runs builds from migration %d on): upgrade corotask\n",
		build.Migration+1, build.Migration, build.Migration+1)
	empty := fmt.Sprintf("no corotask schema in this database (this build needs migration %d): run 'corotask migrate' or sql.Migrate with this build\n",
		build.Migration)
	id := "01J0000000000000000000000A"
	commands := [][]string{
		{"create", "--type", "t"}, {"send", id, `"hi"`}, {"ls"}, {"show", id}, {"history", id}, {"tree", id},
		{"executors"}, {"stats"}, {"retry", id}, {"restart", id}, {"cancel", id}, {"ui", "--addr", "127.0.0.1:0"},
	}
	for _, c := range []struct {
		name  string
		setup func(c *cli)
		want  string
	}{
		{"empty", nil, empty},
		{"behind", func(c *cli) {
			c.exec(`DELETE FROM corotask.migrations WHERE version = $1`, build.Migration)
		}, behind},
		{"ahead", func(c *cli) {
			c.exec(`INSERT INTO corotask.migrations (version, name, checksum) VALUES ($1, 'future.sql', 'x')`, build.Migration+1)
		}, ahead},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cl := &cli{t: t, url: testdb.EmptyURL(t)}
			if c.setup != nil {
				cl.ok("migrate")
				c.setup(cl)
			}
			for _, args := range commands {
				r := cl.run(args...)
				require.Equal(t, exitError, r.code, "%v: %s", args, r)
				require.Equal(t, "corotask "+args[0]+": "+c.want, r.stderr, "%v", args)
				require.Empty(t, r.stdout, "%v", args)
			}
			switch c.name {
			case "ahead":
				r := cl.run("migrate")
				require.Equal(t, exitError, r.code, "%s", r)
				require.Contains(t, r.stderr, "upgrade corotask")
			case "empty":
				cl.ok("migrate")
				cl.create("--type", "t")
			}
		})
	}
}

// An older CLI on a newer schema that declares it compatible works.
func TestCommandsRunOnANewerCompatibleSchema(t *testing.T) {
	t.Parallel()
	c := &cli{t: t, url: testdb.EmptyURL(t)}
	c.ok("migrate")
	last := corosql.BuildSchema().Migration
	c.exec(`INSERT INTO corotask.migrations (version, name, checksum, compatible_from) VALUES ($1, 'future.sql', 'x', $2)`, last+1, last)
	id := c.create("--type", "t")
	require.Contains(t, c.ok("ls"), id.String())
	require.Equal(t, fmt.Sprintf("schema up to date (version %d)\n", last+1), c.ok("migrate"))
	var n int
	require.NoError(t, testdb.Pool(t, c.url).QueryRow(context.Background(), `SELECT count(*) FROM corotask.migrations WHERE version > $1`, last).Scan(&n))
	require.Equal(t, 1, n, "left as it was")
}
