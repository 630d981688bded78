package ui

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/query"
	"github.com/corotask/corotask/tasks"
)

// Config configures the handler New returns. Zero fields take the defaults
// documented on each field.
type Config struct {
	// Pool is the database the pages read and the actions write; required.
	Pool *pgxpool.Pool
	// Prefix is the path the handler is mounted under, e.g. "/corotask"
	// (no trailing slash); empty for the root. Links on the pages start
	// with it, and the handler answers only below it.
	Prefix string
	// ReadOnly hides every action (send, cancel, retry, restart, drop) and
	// makes the handler refuse them with 403 Forbidden.
	ReadOnly bool
	// RefreshInterval is how often a page that is open in a browser is read
	// again and, when it changed, pushed to it (server-sent events).
	// Default 1s.
	RefreshInterval time.Duration
	// CountThreshold is the number of rows of corotask.tasks (as the
	// planner estimates it) above which the counts of suspended and ended
	// tasks, and the throughput, are estimated from a sample of the table
	// instead of counted; see the package documentation. Default 100000;
	// negative always counts exactly.
	CountThreshold int
	// Logger receives the errors of pages and actions. Default: discard.
	Logger *slog.Logger
}

// DefaultRefreshInterval and DefaultCountThreshold are the defaults of
// Config.RefreshInterval and Config.CountThreshold.
const (
	DefaultRefreshInterval = time.Second
	DefaultCountThreshold  = 100000
)

// Handler serves the web UI; it is an http.Handler.
type Handler struct {
	cfg   Config
	mux   *http.ServeMux
	token string // the CSRF token every action form carries
	pages *templates
}

// New returns the handler of the web UI. It does no authentication: wrap it
// in the mounting service's middleware (see the package example).
func New(cfg Config) (*Handler, error) {
	if cfg.Pool == nil {
		return nil, errors.New("ui: Config.Pool is required")
	}
	cfg.Prefix = strings.TrimRight(cfg.Prefix, "/")
	if cfg.Prefix != "" && !strings.HasPrefix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("ui: invalid Config.Prefix %q: must start with /", cfg.Prefix)
	}
	if cfg.RefreshInterval < 0 {
		return nil, fmt.Errorf("ui: invalid Config.RefreshInterval %v: must not be negative", cfg.RefreshInterval)
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.CountThreshold == 0 {
		cfg.CountThreshold = DefaultCountThreshold
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, fmt.Errorf("ui: csrf token: %w", err)
	}
	pages, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), token: hex.EncodeToString(secret[:]), pages: pages}
	h.routes()
	return h, nil
}

// routes registers every page and action under the prefix.
func (h *Handler) routes() {
	p := h.cfg.Prefix
	static, _ := fs.Sub(assets, "static")
	h.mux.Handle("GET "+p+"/static/", http.StripPrefix(p+"/static/", cacheStatic(http.FileServerFS(static))))
	for path, pg := range h.pageRoutes() {
		h.mux.HandleFunc("GET "+p+path, h.servePage(pg))
		h.mux.HandleFunc("GET "+p+"/live"+path, h.streamPage(pg))
	}
	h.mux.HandleFunc("GET "+p+"/goto", h.serveGoto)
	for _, a := range h.actions() {
		h.mux.HandleFunc("POST "+p+"/tasks/{id}/"+a.name, h.serveAction(a))
	}
	for _, a := range h.typeActions() {
		h.mux.HandleFunc("POST "+p+"/types/"+a.name, h.serveTypeAction(a))
	}
}

// ServeHTTP serves a page, an action, the live updates or an asset.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	h.mux.ServeHTTP(w, r)
}

// cacheStatic lets browsers keep the assets for an hour.
func cacheStatic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// serveGoto sends the browser to what the header's box names: the ID of a
// task (ULID or UUID) to the task's page, anything else to the tasks with
// that key, of every type, a key shaped like an ID that no task has
// included (an order's UUID). The text is taken whole as the key: keys
// such as "user:42" are common, so no "type:key" form is read into it (the
// tasks page's form filters by type and key together).
func (h *Handler) serveGoto(w http.ResponseWriter, r *http.Request) {
	s := strings.TrimSpace(r.URL.Query().Get("id"))
	if id, err := tasks.ParseID(s); err == nil && h.taskExists(r.Context(), id) {
		http.Redirect(w, r, h.cfg.Prefix+"/tasks/"+id.String(), http.StatusSeeOther)
		return
	}
	if err := tasks.ValidateKey(s); err != nil {
		v := h.newView(page{nav: "tasks"})
		v.Error = "neither a task ID nor a key: " + err.Error()
		h.write(w, http.StatusBadRequest, "error", v)
		return
	}
	http.Redirect(w, r, h.cfg.Prefix+"/tasks?"+url.Values{"key": {s}}.Encode(), http.StatusSeeOther)
}

// taskExists says whether a task has ID id; on a database error it says
// yes, so that the task's page shows the error.
func (h *Handler) taskExists(ctx context.Context, id tasks.ID) bool {
	var ok bool
	if err := h.cfg.Pool.QueryRow(ctx, query.TaskExists, id).Scan(&ok); err != nil {
		return true
	}
	return ok
}
