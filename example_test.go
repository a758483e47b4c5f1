package pgrelay_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgrelay/pgrelay"
)

// exampleDB is a fresh migrated database for an example, with a table
// app.orders, the sql channel order_placed and the email channel
// order_mail: what an application's deployment would have set up.
func exampleDB() *pgxpool.Pool {
	ctx := context.Background()
	url, err := pg.NewDatabase(ctx, "example")
	if err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	for _, sql := range []string{
		"CREATE SCHEMA app",
		"CREATE TABLE app.orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, customer text NOT NULL)",
		"SELECT pgrelay.register('order_placed', 'SELECT pg_catalog.length($1)')",
		"SELECT pgrelay_notifier.create_channel('order_mail', 'Shop <orders@shop.example>')",
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			log.Fatal(err)
		}
	}
	return pool
}

// An order and its event commit together: the event exists if and only if
// the order does.
func ExampleNotify() {
	ctx := context.Background()
	pool := exampleDB()
	defer pool.Close()

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit

	var orderID int64
	if err := tx.QueryRow(ctx, "INSERT INTO app.orders (customer) VALUES ($1) RETURNING id", "bob").Scan(&orderID); err != nil {
		log.Fatal(err)
	}
	id, err := pgrelay.Notify(ctx, tx, "order_placed", fmt.Sprintf(`{"order_id": %d}`, orderID))
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	status, err := pgrelay.Status(ctx, pool, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(status)
	// Output: pending
}

// Branch on pgrelay's refusals with errors.Is; the server's error, with its
// hint, is still there for errors.As.
func ExampleNotify_errors() {
	ctx := context.Background()
	pool := exampleDB()
	defer pool.Close()

	_, err := pgrelay.Notify(ctx, pool, "order_placd", "{}")
	switch {
	case errors.Is(err, pgrelay.ErrUnknownChannel):
		fmt.Println("unknown channel: a deployment forgot to register it")
	case errors.Is(err, pgrelay.ErrPayloadTooLarge):
		fmt.Println("over 1 MiB: store the data, send a reference")
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		fmt.Println(pgErr.Code, pgErr.Hint)
	}
	// Output:
	// unknown channel: a deployment forgot to register it
	// PR001 Register it first with pgrelay.register().
}

// A reminder a day later: a Processor runs it at its first poll after the due
// time.
func ExampleDelay() {
	ctx := context.Background()
	pool := exampleDB()
	defer pool.Close()

	id, err := pgrelay.Notify(ctx, pool, "order_placed", `{"remind": 7}`, pgrelay.Delay(24*time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	status, err := pgrelay.Status(ctx, pool, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(status)
	// Output: pending
}

func ExampleNotifyMany() {
	ctx := context.Background()
	pool := exampleDB()
	defer pool.Close()

	ids, err := pgrelay.NotifyMany(ctx, pool, "order_placed", []string{"doc-1", "doc-2", "doc-3"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(ids), ids[0] < ids[1] && ids[1] < ids[2])
	// Output: 3 true
}

// An email composed in the transaction is sent by a Processor with SMTP
// configured once the transaction commits.
func ExampleSend() {
	ctx := context.Background()
	pool := exampleDB()
	defer pool.Close()

	id, err := pgrelay.Send(ctx, pool, "order_mail", pgrelay.Email{
		To:       []string{"Bob Example <bob@example.org>"},
		Subject:  "Your order 1042",
		BodyText: "Thank you for your order.",
		Headers:  map[string]string{"Reply-To": "help@shop.example"},
	})
	if err != nil {
		log.Fatal(err)
	}
	status, err := pgrelay.EmailStatus(ctx, pool, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(status)

	_, err = pgrelay.Send(ctx, pool, "order_mail", pgrelay.Email{To: []string{"bob@"}})
	fmt.Println(errors.Is(err, pgrelay.ErrInvalidAddress))
	// Output:
	// queued
	// true
}

func ExampleParseEvent() {
	// The data of a message on pgrelay.events.orders.failed (schema 2: ids
	// are strings; ParseEvent reads schema 1's numbers too).
	data := []byte(`{"schema": 2, "id": "120893035063017472", "queue_id": "120893033301409793",
		"origin_id": "120893033301409793", "channel": "orders", "attempt": 2, "event": "failed",
		"error": null, "error_class": "sqlstate_P0001", "node": 0, "at": "2026-11-30T14:25:46.282113Z"}`)

	ev, err := pgrelay.ParseEvent(data)
	if err != nil {
		log.Fatal(err)
	}
	switch {
	case ev.Log != nil:
		fmt.Println(ev.Log.Channel, ev.Log.OriginID, ev.Log.Event, ev.Log.Attempt, ev.Log.ErrorClass)
	case ev.Notifier != nil:
		fmt.Println(ev.Notifier.Channel, ev.Notifier.NotificationID, ev.Notifier.Status)
	}
	// Output: orders 120893033301409793 failed 2 sqlstate_P0001
}

// A durable JetStream consumer of one channel's events: it remembers what it
// acknowledged across restarts. handle should be idempotent on the event's
// id, as JetStream delivers at least once.
func Example_jetStreamConsumer() {
	ctx := context.Background()
	nc, err := nats.Connect("nats://nats.internal:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "PGRELAY_EVENTS", jetstream.ConsumerConfig{
		Durable:       "billing",
		FilterSubject: "pgrelay.events.orders.>",
		AckPolicy:     jetstream.AckExplicitPolicy,
	})
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ev *pgrelay.LogDocument) error {
		fmt.Println(ev.OriginID, ev.Event)
		return nil
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := pgrelay.ParseEvent(m.Data())
		switch {
		case errors.Is(err, pgrelay.ErrUnsupportedSchema):
			_ = m.Nak() // for a consumer built with a newer pgrelay module
			return
		case err != nil:
			_ = m.Term() // not a pgrelay event: never redeliver
			return
		}
		if err := handle(ev.Log); err != nil {
			_ = m.Nak() // redelivered later
			return
		}
		_ = m.Ack()
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Stop()
	<-ctx.Done()
}
