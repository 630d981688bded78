package tasks_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corotask/corotask/internal/database"
	corosql "github.com/corotask/corotask/sql"
	"github.com/corotask/corotask/tasks"
)

// Creating a task in the transaction that writes the application's own rows
// makes both happen, or neither: no order without its checkout task, and no
// task for an order that was rolled back.
func ExampleCreate() {
	ctx := context.Background()
	db, drop := exampleDB() // a pool on a fresh database with the corotask schema
	defer drop()
	if _, err := db.Exec(ctx, `CREATE TABLE orders (id bigint PRIMARY KEY, checkout uuid NOT NULL)`); err != nil {
		panic(err)
	}

	placeOrder := func(orderID int, commit bool) {
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			task, err := tasks.Create(ctx, tx, tasks.Spec{
				Type:  "shop.checkout",
				State: map[string]any{"order": orderID},
			})
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES ($1, $2)`, orderID, task); err != nil {
				return err
			}
			if !commit {
				return errors.New("payment declined")
			}
			return nil
		})
		fmt.Printf("order %d: %v\n", orderID, err)
	}
	placeOrder(1, true)
	placeOrder(2, false)

	list, err := tasks.List(ctx, db, tasks.Filter{Type: "shop.checkout"})
	if err != nil {
		panic(err)
	}
	for _, t := range list {
		fmt.Println(t.Type, t.Status, string(t.State))
	}
	// Output:
	// order 1: <nil>
	// order 2: payment declined
	// shop.checkout ready {"order": 1}
}

// Cancel ends a task and all its live descendants; its parent, if any, gets
// one completion message that says so.
func ExampleCancel() {
	ctx := context.Background()
	db, drop := exampleDB()
	defer drop()

	// A task with a child and a grandchild, none of them polled yet.
	root, err := tasks.Create(ctx, db, tasks.Spec{Type: "batch.import"})
	if err != nil {
		panic(err)
	}
	child, err := tasks.Create(ctx, db, tasks.Spec{Type: "batch.file", Parent: root})
	if err != nil {
		panic(err)
	}
	if _, err := tasks.Create(ctx, db, tasks.Spec{Type: "batch.row", Parent: child}); err != nil {
		panic(err)
	}

	n, err := tasks.CancelTree(ctx, db, root)
	fmt.Println("canceled:", n, err)
	kids, err := tasks.List(ctx, db, tasks.Filter{Parent: child})
	if err != nil {
		panic(err)
	}
	fmt.Println("grandchild:", kids[0].Status)
	err = tasks.Cancel(ctx, db, root)
	fmt.Println("again:", errors.Is(err, tasks.ErrEnded))
	// Output:
	// canceled: 3 <nil>
	// grandchild: canceled
	// again: true
}

// exampleDB creates a database with the corotask schema on the server that
// internal/database finds (as the tests do), and returns a pool on it and a
// function that drops it. An application instead opens a pool on its own
// database and calls sql.Migrate once at start-up.
func exampleDB() (*pgxpool.Pool, func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := database.URL(ctx, "")
	if err != nil {
		panic(err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "corotask_example_" + hex.EncodeToString(b[:])
	exec := func(ctx context.Context, stmt string) {
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			panic(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, stmt); err != nil {
			panic(err)
		}
	}
	exec(ctx, "CREATE DATABASE "+name)
	u, err := url.Parse(admin)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	db, err := pgxpool.New(ctx, u.String())
	if err != nil {
		panic(err)
	}
	if err := corosql.Migrate(ctx, db); err != nil {
		panic(err)
	}
	return db, func() {
		db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
	}
}
