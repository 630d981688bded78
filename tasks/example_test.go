package tasks_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/corotask/corotask/internal/testdb"
	"github.com/corotask/corotask/tasks"
)

// Creating a task in the transaction that writes the application's own rows
// makes both happen, or neither: no order without its checkout task, and no
// task for an order that was rolled back.
func ExampleCreate() {
	ctx := context.Background()
	db, drop := testdb.ForExample() // a pool on a fresh database with the corotask schema
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
	db, drop := testdb.ForExample()
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

	err = tasks.Cancel(ctx, db, root)
	fmt.Println("canceled:", err)
	kids, err := tasks.List(ctx, db, tasks.Filter{Parent: child})
	if err != nil {
		panic(err)
	}
	fmt.Println("grandchild:", kids[0].Status)
	err = tasks.Cancel(ctx, db, root)
	fmt.Println("again:", errors.Is(err, tasks.ErrEnded))
	// Output:
	// canceled: <nil>
	// grandchild: canceled
	// again: true
}
