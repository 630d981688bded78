package ui_test

import (
	"context"
	"log"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/ui"
)

// The service mounts the UI under /corotask/, behind its own authentication:
// here, a check of a session that only operators have. Everything below the
// prefix (pages, live updates, actions, assets) goes through it.
func Example_mount() {
	pool, err := pgxpool.New(context.Background(), "postgres://app@db.internal/app")
	if err != nil {
		log.Fatal(err)
	}
	h, err := ui.New(ui.Config{Pool: pool, Prefix: "/corotask"})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/corotask/", requireOperator(h))
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}

// requireOperator lets through the requests of signed-in operators only.
func requireOperator(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isOperator(r) {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isOperator stands for the service's own session check.
func isOperator(r *http.Request) bool {
	c, err := r.Cookie("session")
	return err == nil && c.Value != "" // look the session up, check its role
}
