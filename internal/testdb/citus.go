package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	corosql "github.com/corotask/corotask/sql"
)

// CitusEnv names the coordinator of the Citus cluster that the Citus tests
// run against (any database of it in which the workers are registered:
// scripts/citus/cluster.sh start prints one). Without it, those tests skip.
const CitusEnv = "COROTASK_CITUS_URL"

// citusSetupLock is the key of the advisory lock, in the coordinator's
// postgres database, that serializes the tests' setups.
const citusSetupLock = 7165071355189228396

// Citus gives the test a database of its own on the Citus cluster that
// COROTASK_CITUS_URL names: created on the coordinator and on every active
// worker with the citus extension, the nodes registered in it, migrated,
// and distributed by sql.Distribute. It is dropped on every
// node when the test ends. It skips the test when COROTASK_CITUS_URL is
// not set.
func Citus(t testing.TB) *pgxpool.Pool {
	t.Helper()
	coordinator := os.Getenv(CitusEnv)
	if coordinator == "" {
		t.Skipf("%s is not set: no Citus cluster to run on (scripts/citus/cluster.sh starts one; see docs/scaling.md)", CitusEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base, err := url.Parse(coordinator)
	if err != nil {
		t.Fatalf("%s: %v", CitusEnv, err)
	}
	workers, err := citusWorkers(ctx, coordinator)
	if err != nil {
		t.Fatalf("%s: list the workers: %v", CitusEnv, err)
	}
	if len(workers) == 0 {
		t.Fatalf("%s: the database names no active worker: register the workers in it (citus_add_node)", CitusEnv)
	}
	name := citusName()
	coordHost, coordPort := base.Hostname(), base.Port()
	if coordPort == "" {
		coordPort = "5432"
	}
	nodes := append([]string{net.JoinHostPort(coordHost, coordPort)}, workers...)
	at := func(node, db string) string {
		u := *base
		u.Host, u.Path = node, "/"+db
		return u.String()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, node := range nodes {
			if err := citusExec(ctx, at(node, "postgres"), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
				t.Errorf("drop %s on %s: %v", name, node, err)
			}
		}
	})
	// One test's database is set up at a time, across processes: two
	// registering their nodes at once have had a worker's connection fail
	// ("failure on connection marked as essential").
	setup, err := pgx.Connect(ctx, at(nodes[0], "postgres"))
	if err != nil {
		t.Fatalf("%s: %v", CitusEnv, err)
	}
	defer setup.Close(context.Background()) // ends the session, and its lock
	if _, err := setup.Exec(ctx, `SELECT pg_advisory_lock($1)`, citusSetupLock); err != nil {
		t.Fatalf("%s: wait for the other tests' setups: %v", CitusEnv, err)
	}
	for _, node := range nodes {
		if err := citusExec(ctx, at(node, "postgres"), `CREATE DATABASE `+name); err != nil {
			t.Fatalf("create %s on %s: %v", name, node, err)
		}
		if err := citusExec(ctx, at(node, name), `SET client_min_messages = warning; CREATE EXTENSION citus`); err != nil {
			t.Fatalf("citus in %s on %s: %v", name, node, err)
		}
	}
	if err := citusRegister(ctx, at(nodes[0], name), coordHost, coordPort, workers); err != nil {
		t.Fatalf("register the nodes in %s: %v", name, err)
	}
	pool := Pool(t, at(nodes[0], name))
	if err := corosql.Migrate(ctx, pool); err != nil {
		t.Fatalf("migrate %s: %v", name, err)
	}
	if err := corosql.Distribute(ctx, pool); err != nil {
		t.Fatalf("distribute %s: %v", name, err)
	}
	// The distribution sets the database's corotask.distributed for the
	// sessions that connect after it, as executors do in a deployment.
	pool.Reset()
	return pool
}

// citusWorkers returns host:port of each active worker of the cluster.
func citusWorkers(ctx context.Context, coordinator string) ([]string, error) {
	conn, err := pgx.Connect(ctx, coordinator)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT node_name, node_port FROM citus_get_active_worker_nodes() ORDER BY node_port`)
	if err != nil {
		return nil, err
	}
	var workers []string
	for rows.Next() {
		var host string
		var port int
		if err := rows.Scan(&host, &port); err != nil {
			return nil, err
		}
		workers = append(workers, net.JoinHostPort(host, strconv.Itoa(port)))
	}
	return workers, rows.Err()
}

// citusRegister registers the coordinator and the workers in the database
// at url.
func citusRegister(ctx context.Context, url, coordHost, coordPort string, workers []string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET client_min_messages = warning`); err != nil {
		return err
	}
	port, err := strconv.Atoi(coordPort)
	if err != nil {
		return fmt.Errorf("coordinator port %q: %w", coordPort, err)
	}
	if _, err := conn.Exec(ctx, `SELECT citus_set_coordinator_host($1, $2)`, coordHost, port); err != nil {
		return err
	}
	for _, w := range workers {
		host, p, _ := net.SplitHostPort(w)
		port, _ := strconv.Atoi(p)
		if _, err := conn.Exec(ctx, `SELECT citus_add_node($1, $2)`, host, port); err != nil {
			return fmt.Errorf("add worker %s: %w", w, err)
		}
	}
	return nil
}

func citusExec(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// citusName is a new database name, lower case, for CREATE DATABASE.
func citusName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "corotask_citus_" + hex.EncodeToString(b)
}
