package database

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoPostgres is wrapped by the errors of [Private] and [URL] when no
// PostgreSQL server binaries can be found on this machine.
var ErrNoPostgres = errors.New("no postgresql server binaries (initdb, pg_ctl) found on PATH or under " + libGlob +
	": install PostgreSQL (for example `apt-get install postgresql` on Debian/Ubuntu, `dnf install postgresql-server` on Fedora, " +
	"`brew install postgresql` on macOS) or point --database-url / DATABASE_URL at an existing server")

const (
	// libGlob is where Debian and Ubuntu install the server binaries.
	libGlob = "/usr/lib/postgresql/*/bin"

	// privatePort only names the unix socket (.s.PGSQL.5432): the private
	// cluster listens on no TCP port, so it cannot clash with a system server.
	privatePort = 5432

	// maxSocketPath is the longest unix socket path (sizeof(sun_path) - 1 on Linux).
	maxSocketPath = 107

	// confName is the configuration file written before every start and
	// included from postgresql.conf.
	confName = "corotask.conf"
	// logName is the server log inside the data directory (pg_ctl -l).
	logName = "postgres.log"

	// startRetryFor bounds how long Private retries a start that failed
	// because the previous, killed server had not quite gone yet.
	startRetryFor = 30 * time.Second
	// readyTimeout bounds the check that a started server accepts connections.
	readyTimeout = 10 * time.Second
)

// includeLine makes postgresql.conf read confName; "include" rather than
// "include_if_exists" so that the server never starts with the default
// settings (which would listen on TCP port 5432).
const includeLine = "include = '" + confName + "'"

// Private starts (or reuses, if already running) a private cluster whose data
// directory is dir, and returns a URL for its "postgres" database as user
// postgres. Unlike [LocalURL], which names a database of its own on a server
// that may serve others, it names the maintenance database: the cluster is
// corotask's alone, and the tests make their databases through this URL.
//
// Creating the cluster runs initdb with trust authentication. The server
// listens only on a unix socket in dir (or, if that path would be too long for
// a socket, in a directory under os.TempDir named after dir), logs to
// dir/postgres.log and allows 200 connections. When running as root, dir is
// owned by and the server runs as the postgres OS user.
//
// Concurrent calls for the same dir, from any number of goroutines or
// processes, are serialised with a lock on the file dir+".lock": one of them
// creates and starts the cluster, the others reuse it.
func Private(ctx context.Context, dir string) (string, error) {
	c, err := newCluster(dir)
	if err != nil {
		return "", fmt.Errorf("private postgres in %s: %w", dir, err)
	}
	u, err := c.ensureRunning(ctx)
	if err != nil {
		return "", fmt.Errorf("private postgres in %s: %w", c.dir, err)
	}
	return u, nil
}

// PrivateWithSettings is [Private] with extra server settings, one
// "name = value" line each, written to the cluster's configuration before
// every start (settings that need a restart, such as
// shared_preload_libraries, take effect only when the call starts the
// server). It is meant for throwaway clusters: `corotask bench
// -private-cluster` starts one with stock settings.
func PrivateWithSettings(ctx context.Context, dir string, settings []string) (string, error) {
	for _, s := range settings {
		if name, _, ok := strings.Cut(s, "="); !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(s, "\n\r") {
			return "", fmt.Errorf("private postgres in %s: setting %q is not one line of the form name = value", dir, s)
		}
	}
	c, err := newCluster(dir)
	if err != nil {
		return "", fmt.Errorf("private postgres in %s: %w", dir, err)
	}
	c.settings = settings
	u, err := c.ensureRunning(ctx)
	if err != nil {
		return "", fmt.Errorf("private postgres in %s: %w", c.dir, err)
	}
	return u, nil
}

// RemovePrivate stops the private cluster in dir and removes its data
// directory, lock file and socket directory.
func RemovePrivate(ctx context.Context, dir string) error {
	c, err := newCluster(dir)
	if err == nil {
		err = c.stop(ctx)
	}
	if err == nil {
		err = os.RemoveAll(c.dir)
		if lerr := os.Remove(c.dir + ".lock"); lerr != nil && !errors.Is(lerr, os.ErrNotExist) {
			err = errors.Join(err, lerr)
		}
		if c.sockDir != c.dir {
			err = errors.Join(err, os.RemoveAll(c.sockDir))
		}
	}
	if err != nil {
		return fmt.Errorf("remove private postgres in %s: %w", dir, err)
	}
	return nil
}

// StopPrivate stops the private cluster in dir (pg_ctl stop -m fast), waiting
// until it is down. Stopping a cluster that is not running, or a directory that
// holds none, is not an error. It is meant for tests.
func StopPrivate(ctx context.Context, dir string) error {
	c, err := newCluster(dir)
	if err == nil {
		err = c.stop(ctx)
	}
	if err != nil {
		return fmt.Errorf("stop private postgres in %s: %w", dir, err)
	}
	return nil
}

// cluster is a private cluster and what is needed to run it.
type cluster struct {
	dir     string   // absolute data directory
	sockDir string   // unix socket directory
	bin     binaries // server binaries
	owner   *account // OS user to run as; nil means the current user
	// settings are extra "name = value" lines of the configuration.
	settings []string
}

func newCluster(dir string) (*cluster, error) {
	if dir == "" {
		return nil, errors.New("empty data directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	bin, err := defaultBinaries()
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: abs, sockDir: abs, bin: bin}
	if len(abs)+len("/.s.PGSQL.")+len(strconv.Itoa(privatePort)) > maxSocketPath {
		sum := sha256.Sum256([]byte(abs))
		c.sockDir = filepath.Join(os.TempDir(), "corotask-pg-"+hex.EncodeToString(sum[:8]))
	}
	if os.Geteuid() == 0 {
		if c.owner, err = lookupAccount("postgres"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// URL is the connection string of the cluster's postgres database.
func (c *cluster) url() string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Path:     "/postgres",
		RawQuery: "host=" + strings.ReplaceAll(url.QueryEscape(c.sockDir), "%2F", "/") + "&port=" + strconv.Itoa(privatePort),
	}
	return u.String()
}

func (c *cluster) logPath() string { return filepath.Join(c.dir, logName) }

// ensureRunning creates the cluster if needed, starts it unless it is already
// up and returns its URL once a connection succeeds.
func (c *cluster) ensureRunning(ctx context.Context) (string, error) {
	if err := os.MkdirAll(filepath.Dir(c.dir), 0o755); err != nil {
		return "", fmt.Errorf("create parent directory: %w", err)
	}
	unlock, err := lockFile(ctx, c.dir+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()

	if err := c.checkReachable(); err != nil {
		return "", err
	}
	if err := c.initIfNeeded(ctx); err != nil {
		return "", err
	}
	u := c.url()
	if ping(ctx, u, 2*time.Second) == nil {
		return u, nil // already running
	}
	if err := c.start(ctx); err != nil {
		return "", err
	}
	if err := ping(ctx, u, readyTimeout); err != nil {
		return "", fmt.Errorf("server started but does not accept connections at %s (log %s): %w", u, c.logPath(), err)
	}
	return u, nil
}

// initIfNeeded runs initdb unless dir already holds a cluster of the right
// version. initdb writes to dir.init, renamed to dir once complete, so that an
// interrupted initdb never leaves a half-made cluster behind.
func (c *cluster) initIfNeeded(ctx context.Context) error {
	v, err := os.ReadFile(filepath.Join(c.dir, "PG_VERSION"))
	if err == nil {
		if got := strings.TrimSpace(string(v)); got != c.bin.major {
			return fmt.Errorf("data directory is for postgresql %s but the binaries in %s are version %s: remove it or install postgresql %s",
				got, c.bin.dir, c.bin.major, got)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read PG_VERSION: %w", err)
	}
	if entries, err := os.ReadDir(c.dir); err == nil && len(entries) > 0 {
		return errors.New("directory exists, is not empty and is not a postgresql data directory")
	}

	tmp := c.dir + ".init"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove leftover %s: %w", tmp, err)
	}
	if err := c.mkdirOwned(tmp); err != nil {
		return err
	}
	_, err = c.run(ctx, filepath.Join(c.bin.dir, "initdb"),
		"-D", tmp, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-locale")
	if err == nil {
		err = appendLine(filepath.Join(tmp, "postgresql.conf"), includeLine)
	}
	if err == nil {
		// Replaces dir if it is an empty directory.
		err = os.Rename(tmp, c.dir)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("create cluster: %w", err)
	}
	return nil
}

// start writes the configuration and starts the server with pg_ctl start -w.
// A start that fails because a killed server's processes have not quite gone
// yet (the lock file or shared memory still in use) is retried for a while.
func (c *cluster) start(ctx context.Context) error {
	if err := c.writeConfig(); err != nil {
		return err
	}
	deadline := time.Now().Add(startRetryFor)
	delay := 50 * time.Millisecond
	for {
		if err := c.removeStalePid(); err != nil {
			return err
		}
		var logStart int64
		if fi, err := os.Stat(c.logPath()); err == nil {
			logStart = fi.Size()
		}
		_, err := c.run(ctx, filepath.Join(c.bin.dir, "pg_ctl"), "start",
			"-D", c.dir, "-l", c.logPath(), "-w", "-t", "300", "-s")
		if err == nil {
			return nil
		}
		logTail := readFrom(c.logPath(), logStart)
		retry := strings.Contains(logTail, "already exists") || // a lock file
			strings.Contains(logTail, "is still in use") // shared memory
		if !retry || ctx.Err() != nil || time.Now().Add(delay).After(deadline) {
			if logTail != "" {
				err = fmt.Errorf("%w; log:\n%s", err, logTail)
			}
			return fmt.Errorf("start server (log %s): %w", c.logPath(), err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("start server (log %s): %w", c.logPath(), ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, time.Second)
	}
}

// stop stops the server if it is running.
func (c *cluster) stop(ctx context.Context) error {
	if _, err := os.Stat(c.dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	unlock, err := lockFile(ctx, c.dir+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.removeStalePid(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(c.dir, "postmaster.pid")); errors.Is(err, os.ErrNotExist) {
		return nil // not running
	}
	_, err = c.run(ctx, filepath.Join(c.bin.dir, "pg_ctl"), "stop", "-D", c.dir, "-m", "fast", "-w", "-t", "300", "-s")
	return err
}

// writeConfig writes confName (with the socket directory, which depends on
// where dir is now) and makes sure postgresql.conf includes it.
func (c *cluster) writeConfig() error {
	if c.sockDir != c.dir {
		if err := c.mkdirOwned(c.sockDir); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := c.checkOwned(c.sockDir); err != nil {
			return err
		}
	}
	conf := filepath.Join(c.dir, "postgresql.conf")
	b, err := os.ReadFile(conf)
	if err != nil {
		return fmt.Errorf("read configuration: %w", err)
	}
	if !bytes.Contains(b, []byte("\n"+includeLine+"\n")) {
		if err := appendLine(conf, includeLine); err != nil {
			return fmt.Errorf("write configuration: %w", err)
		}
	}
	text := "# Written by corotask (internal/database) before every start; edits are lost.\n" +
		"listen_addresses = ''\n" +
		"unix_socket_directories = '" + strings.ReplaceAll(c.sockDir, "'", "''") + "'\n" +
		"port = " + strconv.Itoa(privatePort) + "\n" +
		"max_connections = 200\n"
	for _, l := range c.settings {
		text += l + "\n"
	}
	path := filepath.Join(c.dir, confName)
	tmp := path + ".tmp"
	err = os.WriteFile(tmp, []byte(text), 0o600)
	if err == nil {
		err = c.chown(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("write configuration: %w", err)
	}
	return nil
}

// removeStalePid removes postmaster.pid and the socket's lock file if the
// process they name is gone, a zombie or not a postmaster running in dir, so
// that neither postgres nor pg_ctl mistakes an unrelated process for the
// server. It does nothing where /proc is not available.
func (c *cluster) removeStalePid() error {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return nil
	}
	for _, path := range []string{
		filepath.Join(c.dir, "postmaster.pid"),
		filepath.Join(c.sockDir, ".s.PGSQL."+strconv.Itoa(privatePort)+".lock"),
	} {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		pid, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || pid <= 0 {
			continue // being written or garbage: leave it to postgres
		}
		if !c.isPostmaster(pid) {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove stale %s: %w", path, err)
			}
		}
	}
	return nil
}

// isPostmaster reports whether pid may be a live postmaster of the cluster:
// false only if the process is gone, a zombie (killed but not yet reaped) or
// known to work in another directory.
func (c *cluster) isPostmaster(pid int) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(proc + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	// A postmaster's working directory is its data directory. The comparison
	// is by inode, so it holds whichever path reached dir.
	cwd, err1 := os.Stat(proc + "/cwd")
	d, err2 := os.Stat(c.dir)
	return err1 != nil || err2 != nil || os.SameFile(cwd, d)
}

// run runs a PostgreSQL program as the cluster's owner, returning its output;
// the error includes the output.
func (c *cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = "/" // the owner may not be able to enter the current directory
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		// PGDATA, PGPORT and friends would override what is passed here.
		if strings.HasPrefix(kv, "PG") {
			continue
		}
		if c.owner != nil && (strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "USER=") || strings.HasPrefix(kv, "LOGNAME=")) {
			continue
		}
		env = append(env, kv)
	}
	if c.owner != nil {
		env = append(env, "HOME="+c.owner.home, "USER="+c.owner.name, "LOGNAME="+c.owner.name)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: uint32(c.owner.uid), Gid: uint32(c.owner.gid), Groups: c.owner.groups,
		}}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg != "" {
			return out, fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, msg)
		}
		return out, fmt.Errorf("%s %s: %w", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out, nil
}

// mkdirOwned creates dir with mode 0700, owned by the cluster's owner.
func (c *cluster) mkdirOwned(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := c.chown(dir); err != nil {
		return fmt.Errorf("give %s to the postgres user: %w", dir, err)
	}
	return nil
}

// chown gives path to the cluster's owner when running as root.
func (c *cluster) chown(path string) error {
	if c.owner == nil {
		return nil
	}
	return os.Lchown(path, c.owner.uid, c.owner.gid)
}

// checkOwned makes sure path is a directory (not a symlink) owned by the
// cluster's owner, as a socket directory in a shared place must be.
func (c *cluster) checkOwned(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	uid := os.Geteuid()
	if c.owner != nil {
		uid = c.owner.uid
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || (ok && int(st.Uid) != uid) {
		return fmt.Errorf("socket directory %s is not a directory owned by uid %d", path, uid)
	}
	return nil
}

// checkReachable makes sure that, when running as root, the postgres OS user
// can enter every directory above dir; otherwise initdb and the server fail
// with obscure errors.
func (c *cluster) checkReachable() error {
	if c.owner == nil {
		return nil
	}
	for p := filepath.Dir(c.dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !c.owner.canEnter(fi) {
			return fmt.Errorf("the %s OS user, which runs the server because postgres refuses to run as root, cannot enter %s (mode %v): make it searchable (chmod o+x) or use a data directory elsewhere",
				c.owner.name, p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// account is an OS user to run the server as.
type account struct {
	name     string
	uid, gid int
	groups   []uint32 // supplementary groups
	home     string
}

func lookupAccount(name string) (*account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("running as root, but postgres cannot run as root and there is no %q OS user to run it as (create one, e.g. `useradd --system %s`, or set DATABASE_URL): %w",
			name, name, err)
	}
	a := &account{name: name, home: u.HomeDir}
	if a.uid, err = strconv.Atoi(u.Uid); err != nil {
		return nil, fmt.Errorf("uid %q of OS user %s: %w", u.Uid, name, err)
	}
	if a.gid, err = strconv.Atoi(u.Gid); err != nil {
		return nil, fmt.Errorf("gid %q of OS user %s: %w", u.Gid, name, err)
	}
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				a.groups = append(a.groups, uint32(n))
			}
		}
	}
	return a, nil
}

// canEnter reports whether the account may search the directory described by fi.
func (a *account) canEnter(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := fi.Mode().Perm()
	if int(st.Uid) == a.uid {
		return perm&0o100 != 0
	}
	inGroup := int(st.Gid) == a.gid
	for _, g := range a.groups {
		inGroup = inGroup || g == st.Gid
	}
	if inGroup {
		return perm&0o010 != 0
	}
	return perm&0o001 != 0
}

// lockFile takes an exclusive flock on path (created if needed) and returns
// the function that releases it. Locks taken through separate opens conflict
// even within one process, so this serialises goroutines as well as
// processes. If ctx ends first, the lock is released as soon as it is got.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	fd := int(f.Fd())
	done := make(chan error, 1)
	go func() {
		for {
			err := syscall.Flock(fd, syscall.LOCK_EX)
			if err != syscall.EINTR {
				done <- err
				return
			}
		}
	}()
	unlock := func() {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		_ = f.Close()
	}
	select {
	case err := <-done:
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return unlock, nil
	case <-ctx.Done():
		go func() {
			if <-done == nil {
				unlock()
			} else {
				_ = f.Close()
			}
		}()
		return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
	}
}

// appendLine appends line to the file at path, on a line of its own.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("\n" + line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readFrom returns the end of the file at path from offset on, at most 2 KiB.
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size()-offset > 2048 {
		offset = fi.Size() - 2048
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}

// binaries is a set of PostgreSQL server programs.
type binaries struct {
	dir   string // holds initdb, pg_ctl and postgres
	major string // major version, such as "15"
}

// defaultBinaries finds the binaries once per process.
var defaultBinaries = sync.OnceValues(func() (binaries, error) {
	return findBinaries(os.Getenv("PATH"), libGlob)
})

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)(?:\.(\d+))?`)

// findBinaries looks for initdb and pg_ctl first on the search path pathEnv
// (following symlinks, so that postgres is found next to them), then in the
// highest version matching glob. A candidate is used only if both programs
// run and report the same version.
func findBinaries(pathEnv, glob string) (binaries, error) {
	var candidates []string
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		initdb := filepath.Join(d, "initdb")
		if !isExecutable(initdb) {
			continue
		}
		if real, err := filepath.EvalSymlinks(initdb); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
		break // only the first initdb on PATH, as a shell would run
	}
	dirs, _ := filepath.Glob(glob)
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[j], dirs[i]) })
	candidates = append(candidates, dirs...)

	var problems []string
	for _, d := range candidates {
		b, err := checkBinaries(d)
		if err == nil {
			return b, nil
		}
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return binaries{}, fmt.Errorf("%w (unusable: %s)", ErrNoPostgres, strings.Join(problems, "; "))
	}
	return binaries{}, ErrNoPostgres
}

// checkBinaries reports whether dir holds working initdb, pg_ctl and postgres
// of one version.
func checkBinaries(dir string) (binaries, error) {
	if !isExecutable(filepath.Join(dir, "postgres")) {
		return binaries{}, fmt.Errorf("%s has no postgres program", dir)
	}
	var major string
	for _, prog := range []string{"initdb", "pg_ctl"} {
		path := filepath.Join(dir, prog)
		out, err := exec.Command(path, "--version").Output()
		if err != nil {
			return binaries{}, fmt.Errorf("%s --version: %w", path, err)
		}
		m := versionRE.FindStringSubmatch(string(out))
		if m == nil {
			return binaries{}, fmt.Errorf("%s --version printed no PostgreSQL version: %q", path, strings.TrimSpace(string(out)))
		}
		v := m[1]
		if n, _ := strconv.Atoi(v); n < 10 && m[2] != "" {
			v += "." + m[2] // before 10 the major version had two parts
		}
		if major != "" && v != major {
			return binaries{}, fmt.Errorf("%s has initdb %s but pg_ctl %s", dir, major, v)
		}
		major = v
	}
	return binaries{dir: dir, major: major}, nil
}

// versionLess orders /usr/lib/postgresql/<version>/bin paths by version.
func versionLess(a, b string) bool {
	va := strings.Split(filepath.Base(filepath.Dir(a)), ".")
	vb := strings.Split(filepath.Base(filepath.Dir(b)), ".")
	for i := 0; i < len(va) && i < len(vb); i++ {
		na, errA := strconv.Atoi(va[i])
		nb, errB := strconv.Atoi(vb[i])
		if errA != nil || errB != nil {
			if va[i] != vb[i] {
				return va[i] < vb[i]
			}
			continue
		}
		if na != nb {
			return na < nb
		}
	}
	return len(va) < len(vb)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}
