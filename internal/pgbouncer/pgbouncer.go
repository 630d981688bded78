// Package pgbouncer starts a real PgBouncer for a test, in front of a test
// database, so that the executor can be tested behind the pooler operators
// put in front of PostgreSQL (docs/operations.md, "PgBouncer and other
// poolers").
//
// It runs the pgbouncer binary of the machine (Debian's pgbouncer package;
// COROTASK_PGBOUNCER names another) as a child process of the test, on a
// free loopback port, with a configuration generated in the test's temporary
// directory. A test that needs it fails, with the command that installs it,
// when it is missing: .ci/run installs it. The service the Debian package
// may start is neither used nor disturbed.
package pgbouncer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configures a PgBouncer. Zero fields take the defaults in brackets.
type Options struct {
	// PoolMode is PgBouncer's pool_mode: session, transaction or statement
	// [transaction].
	PoolMode string
	// PoolSize is default_pool_size: the server connections PgBouncer opens
	// for the database [20].
	PoolSize int
}

// startTimeout bounds how long PgBouncer may take to start listening: a
// last resort against a binary that hangs, far above the milliseconds it
// takes even on a loaded machine.
const startTimeout = time.Minute

// Start starts PgBouncer in front of the database target (a URL or
// keyword/value string pgx parses, as internal/testdb returns) and returns a
// URL of the same database through it, without TLS (PgBouncer listens on
// loopback only). PgBouncer trusts every client and logs in to the server as
// target does. It is stopped when the test ends.
//
// The test fails if pgbouncer is not installed.
func Start(t testing.TB, target string, opts Options) string {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	if opts.PoolMode == "" {
		opts.PoolMode = "transaction"
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = 20
	}
	cc, err := pgx.ParseConfig(target)
	if err != nil {
		t.Fatalf("pgbouncer: parse %s: %v", target, err)
	}
	dir := t.TempDir()
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// PgBouncer refuses to run as root: it runs as postgres, which must
		// read its configuration.
		if cred, err = postgresUser(); err != nil {
			t.Fatalf("pgbouncer: %v", err)
		}
		for _, d := range []string{dir, filepath.Dir(dir)} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatalf("pgbouncer: %v", err)
			}
		}
	}
	var lastErr error
	for range 5 {
		// A port found free may be taken before PgBouncer binds it: try
		// another.
		port, err := freePort()
		if err != nil {
			t.Fatalf("pgbouncer: %v", err)
		}
		ini, err := writeConfig(dir, cc, port, opts)
		if err != nil {
			t.Fatalf("pgbouncer: %v", err)
		}
		p, err := start(bin, ini, cred)
		if err != nil {
			t.Fatalf("pgbouncer: %v", err)
		}
		if err = p.waitListening(); err != nil {
			lastErr = err
			continue
		}
		t.Cleanup(func() {
			if err := p.stop(); err != nil {
				t.Errorf("pgbouncer: %v", err)
			}
		})
		u := url.URL{
			Scheme:   "postgres",
			User:     url.User(cc.User),
			Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Path:     "/" + cc.Database,
			RawQuery: "sslmode=disable",
		}
		return u.String()
	}
	t.Fatalf("pgbouncer: did not start: %v", lastErr)
	return ""
}

// binary returns the pgbouncer executable.
func binary() (string, error) {
	if p := os.Getenv("COROTASK_PGBOUNCER"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	// Debian installs it in /usr/sbin, which a user's PATH may lack.
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", errors.New("pgbouncer is not installed: this test runs a real PgBouncer; " +
		"install Debian's package (sudo apt-get install pgbouncer; .ci/run does it), " +
		"or set COROTASK_PGBOUNCER to the path of a pgbouncer binary")
}

// postgresUser returns the credentials of the postgres OS user.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and pgbouncer refuses root: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeConfig writes pgbouncer.ini and its user list into dir, and returns
// the configuration's path.
func writeConfig(dir string, cc *pgx.ConnConfig, port int, opts Options) (string, error) {
	server := []string{
		"host=" + cc.Host,
		"port=" + strconv.Itoa(int(cc.Port)),
		"dbname=" + cc.Database,
		"user=" + cc.User,
	}
	if cc.Password != "" {
		server = append(server, "password="+cc.Password)
	}
	serverTLS := "disable"
	if cc.TLSConfig != nil {
		// A server target reaches over TLS (sslmode=require, prefer...).
		serverTLS = "prefer"
	}
	ini := strings.Join([]string{
		"[databases]",
		cc.Database + " = " + strings.Join(server, " "),
		"[pgbouncer]",
		"listen_addr = 127.0.0.1",
		"listen_port = " + strconv.Itoa(port),
		"unix_socket_dir =",
		"auth_type = trust",
		"auth_file = " + filepath.Join(dir, "userlist.txt"),
		"pool_mode = " + opts.PoolMode,
		"default_pool_size = " + strconv.Itoa(opts.PoolSize),
		"max_client_conn = 1000",
		"ignore_startup_parameters = extra_float_digits",
		"server_tls_sslmode = " + serverTLS,
		// After PostgreSQL restarts (the fault harness restarts it), try
		// to log in again after a second rather than the default 15.
		"server_login_retry = 1",
		"",
	}, "\n")
	users := fmt.Sprintf("%q \"\"\n", cc.User)
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(users), 0o644); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "pgbouncer.ini")
	return path, os.WriteFile(path, []byte(ini), 0o644)
}

// process is a running pgbouncer.
type process struct {
	cmd       *exec.Cmd
	listening chan struct{} // closed when it logs that it listens
	exited    chan struct{} // closed when it has exited; then err is set
	err       error

	mu  sync.Mutex
	log []string
}

func start(bin, ini string, cred *syscall.Credential) (*process, error) {
	cmd := exec.Command(bin, ini)
	// Should the test binary die, PgBouncer dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	out, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = cmd.Stderr
	p := &process{cmd: cmd, listening: make(chan struct{}), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log = append(p.log, line)
			p.mu.Unlock()
			if strings.Contains(line, "listening on 127.0.0.1") {
				once.Do(func() { close(p.listening) })
			}
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitListening waits until PgBouncer listens, or has exited.
func (p *process) waitListening() error {
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case <-p.listening:
		return nil
	case <-p.exited:
		return fmt.Errorf("pgbouncer exited (%v):\n%s", p.err, p.output())
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("pgbouncer did not listen within %s:\n%s", startTimeout, p.output())
	}
}

// stop shuts PgBouncer down at once, closing its server connections, and
// waits for it to exit.
func (p *process) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	select {
	case <-p.exited:
		return nil
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("pgbouncer did not stop on SIGTERM:\n%s", p.output())
	}
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log, "\n")
}
