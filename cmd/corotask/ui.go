package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/database"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/ui"
)

// uiAuthEnv is the environment variable --auth defaults to.
const uiAuthEnv = "COROTASK_UI_AUTH"

var uiCmd = &command{
	name:    "ui",
	summary: "serve the web UI",
	help: `Serve the web UI: an overview of the tasks by type and status, lists of tasks
with filters, each task's state, messages, history, children and workflow
tree, the executors, all updated live; and, unless --read-only, forms that
send a message to a task, cancel it, retry it now, restart it or drop a
message from its inbox, each after a confirmation.

It listens on 127.0.0.1:8080 unless --addr says otherwise. With --auth
USER:PASSWORD (or $` + uiAuthEnv + `), every request must carry those
credentials (HTTP basic authentication); listening on an address other than
loopback without them is refused. Stop it with Ctrl-C.`,
	example: `corotask ui
corotask ui --addr 127.0.0.1:9000 --read-only
` + uiAuthEnv + `=admin:s3cret corotask ui --addr :8080`,
	flags: func(fs *flag.FlagSet) runFunc {
		addr := fs.String("addr", "127.0.0.1:8080", "listen on `HOST:PORT` (default 127.0.0.1:8080)")
		readOnly := fs.Bool("read-only", false, "hide every action (send, cancel, retry, restart, drop) and refuse them")
		auth := fs.String("auth", "", "require HTTP basic authentication as `USER:PASSWORD` (default $"+uiAuthEnv+")")
		prefix := fs.String("prefix", "", "serve under `PATH`, e.g. /corotask (default: the root)")
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args); err != nil {
				return err
			}
			creds := *auth
			if creds == "" {
				creds = a.getenv(uiAuthEnv)
			}
			user, password, hasAuth := strings.Cut(creds, ":")
			if creds != "" && (!hasAuth || user == "" || password == "") {
				return usagef("--auth: want USER:PASSWORD, both non-empty")
			}
			host, _, err := net.SplitHostPort(*addr)
			if err != nil {
				return usagef("--addr %q: %v", *addr, err)
			}
			if creds == "" && !isLoopback(host) {
				return usagef("--addr %s is not a loopback address: give --auth USER:PASSWORD (or $%s) to serve it to the network", *addr, uiAuthEnv)
			}
			t, err := a.target(ctx)
			if err != nil {
				return err
			}
			cfg, err := pgxpool.ParseConfig(t.ConnString)
			if err != nil {
				return invalidURL(t, err)
			}
			if cfg.ConnConfig.ConnectTimeout == 0 {
				cfg.ConnConfig.ConnectTimeout = connectTimeout
			}
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				return database.ConnectError(t.String(), err)
			}
			defer pool.Close()
			if err := pool.Ping(ctx); err != nil {
				return database.ConnectError(t.String(), err)
			}
			if _, err := corosql.CheckSchema(ctx, pool); err != nil {
				return err
			}
			h, err := ui.New(ui.Config{
				Pool:     pool,
				Prefix:   *prefix,
				ReadOnly: *readOnly,
				Logger:   slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
			})
			if err != nil {
				return usagef("%v", err)
			}
			var handler http.Handler = h
			if creds != "" {
				handler = basicAuth(handler, user, password)
			} else {
				handler = loopbackHostOnly(handler)
			}
			if *prefix != "" {
				mux := http.NewServeMux()
				mux.Handle(strings.TrimRight(*prefix, "/")+"/", handler)
				handler = mux
			}
			return serve(ctx, a, *addr, handler, strings.TrimRight(*prefix, "/")+"/", *readOnly)
		}
	},
}

// serve serves handler on addr until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, a *app, addr string, handler http.Handler, path string, readOnly bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	mode := ""
	if readOnly {
		mode = " (read-only)"
	}
	fmt.Fprintf(a.stderr, "corotask ui: serving on http://%s%s%s\n", ln.Addr(), path, mode)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Live pages keep their streams open: they end with ctx (BaseContext),
	// so Shutdown does not wait for them.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}

// isLoopback reports whether host (of --addr) is a loopback address or
// localhost; "" (every interface) is not.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHostOnly refuses requests whose Host is not a loopback name or
// address. Served on loopback without authentication, the UI must not answer
// a page whose own host name an attacker made resolve to 127.0.0.1 (DNS
// rebinding): the browser would take that page for the UI's origin, and let
// it read the UI and post its forms.
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host // no port
		}
		if !isLoopback(strings.Trim(host, "[]")) {
			http.Error(w, "corotask ui: refused: the Host header is not a loopback address (serve with --auth to reach it by another name)", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// basicAuth requires HTTP basic authentication as user and password.
func basicAuth(next http.Handler, user, password string) http.Handler {
	// Compared as hashes, so that the comparison takes the same time
	// whatever the lengths.
	wantUser, wantPass := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		gotUser, gotPass := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		if !ok || subtle.ConstantTimeCompare(gotUser[:], wantUser[:])&subtle.ConstantTimeCompare(gotPass[:], wantPass[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="corotask", charset="UTF-8"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
