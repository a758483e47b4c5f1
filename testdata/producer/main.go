// Command producer is a program that only enqueues: it calls every
// producing function of the root package, so that TestProducerLinks reads
// what such a program links.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay"
)

type order struct {
	ID int `json:"id"`
}

func main() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	id, err := pgrelay.Notify(ctx, tx, "order_placed", `{"id": 1}`, pgrelay.Delay(time.Minute))
	fmt.Println(id, err)
	ids, err := pgrelay.NotifyMany(ctx, tx, "order_placed", []string{"a", "b"})
	fmt.Println(ids, err)
	st, err := pgrelay.Status(ctx, tx, id)
	fmt.Println(st, err)
	fmt.Println(pgrelay.Cancel(ctx, tx, id))
	mail, err := pgrelay.Send(ctx, tx, "mail", pgrelay.Email{To: []string{"a@example.com"}, Subject: "hi", BodyText: "hi"})
	fmt.Println(mail, err)
	ev, err := pgrelay.ParseEvent([]byte(`{"schema": 1}`))
	fmt.Println(ev, err, pgrelay.RetryAfter(time.Second, nil), pgrelay.Permanent(err),
		pgrelay.Snooze(time.Second))
	fmt.Println(tx.Commit(ctx))
}
