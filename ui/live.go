package ui

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// keepAlive is how long a live stream may stay silent before a comment is
// sent, so that proxies keep it open and a closed browser is noticed.
const keepAlive = 15 * time.Second

// streamPage serves a page's live updates as server-sent events: every
// RefreshInterval it reads the page again and, when its live part changed,
// sends it as an "update" event whose data is the part's HTML. The browser
// (static/ui.js) puts it in place. An error (the task was deleted) is sent
// as an "error" event, and reading goes on.
func (h *Handler) streamPage(pg page) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		flusher, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "streaming unsupported", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "retry: %d\n\n", max(1000, h.cfg.RefreshInterval.Milliseconds()))
		flusher.Flush()

		ctx := r.Context()
		tick := time.NewTicker(h.cfg.RefreshInterval)
		defer tick.Stop()
		var last []byte
		lastWrite := time.Now()
		for {
			event, data := "update", []byte(nil)
			v := h.newView(pg)
			if err := h.read(ctx, pg, r, v); err != nil {
				if ctx.Err() != nil {
					return
				}
				_, msg := h.errorStatus(err)
				event, data = "error", []byte(msg)
			} else if data, err = h.pages.render(pg.name, "live", v); err != nil {
				h.cfg.Logger.Error("ui: render live", "page", pg.name, "error", err)
				return
			}
			switch {
			case !bytes.Equal(data, last):
				last = data
				writeEvent(w, event, data)
			case time.Since(lastWrite) >= keepAlive:
				fmt.Fprint(w, ": keep-alive\n\n")
			default:
				goto wait
			}
			flusher.Flush()
			lastWrite = time.Now()
		wait:
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}
}

// writeEvent writes one server-sent event; each line of data is a data
// field (the browser joins them with newlines).
func writeEvent(w http.ResponseWriter, event string, data []byte) {
	var b strings.Builder
	b.WriteString("event: " + event + "\n")
	for _, line := range strings.Split(strings.ReplaceAll(string(data), "\r", ""), "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	w.Write([]byte(b.String()))
}
