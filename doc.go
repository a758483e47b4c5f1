// Package pgrelay is the Go API of pgrelay for applications: enqueue events
// and emails in your own PostgreSQL transaction, read their status, branch on
// pgrelay's errors, and decode the status events pgrelay publishes on NATS.
//
// pgrelay is a transactional outbox. Your transaction writes its data and
// calls Notify (pgrelay.notify() in SQL) on a registered channel; the event
// exists if and only if the transaction commits. A Processor (`pgrelay run`)
// then runs the channel's handler — a SQL statement, an email, a NATS
// publish — with retries, and records every outcome.
//
// # Enqueue with your data
//
// Give Notify the transaction (a pgx.Tx; any Querier does):
//
//	tx, err := pool.Begin(ctx)
//	...
//	_, err = tx.Exec(ctx, "INSERT INTO app.orders ...")
//	id, err := pgrelay.Notify(ctx, tx, "order_placed", `{"order": 42}`)
//	...
//	err = tx.Commit(ctx)
//
// NotifyJSON enqueues a Go value encoded as JSON, which the processor
// package's HandleJSON decodes back. NotifyMany enqueues a batch in one
// call; NotBefore and Delay make events due later. Status tells where an
// event stands. Send composes an email on an email channel the same way;
// EmailStatus and CancelEmail follow it.
//
// Channels are registered in SQL (pgrelay.register(), or
// pgrelay_notifier.create_channel() for email), usually by a deployment
// script; the schema comes with `pgrelay migrate`. The role calling these
// functions needs pgrelay_producer.
//
// # Errors
//
// When pgrelay refuses a call, the error matches a sentinel with errors.Is —
// one per SQLSTATE of class PR, such as ErrUnknownChannel (PR001) or
// ErrPayloadTooLarge (PR006) — and still holds the server's
// *pgconn.PgError for errors.As. Classify does the same for errors of
// pgrelay's SQL functions called directly.
//
// # Status events on NATS
//
// With --nats-url, the Processor publishes every outcome as a JSON document
// on pgrelay.events.<channel>.<event> (and every email status change on
// pgrelay.notifier.<channel>.<status>), once each into a JetStream stream.
// ParseEvent decodes one; see the JetStream consumer example.
//
// # Go handlers
//
// A program can run events itself: the package
// github.com/pgrelay/pgrelay/processor embeds a Processor that runs
// channels of kind go with the program's Go functions. They get an Event
// and return RetryAfter or Permanent to steer the retry. This package
// links pgx and the standard library only: a program that just enqueues
// links none of the Processor's dependencies (the actor library, NATS,
// SMTP, Prometheus).
//
// # Documentation
//
// The guides live in the repository's docs folder
// (https://github.com/pgrelay/pgrelay/tree/main/docs): user-guide.md
// (channels, retries, concurrency modes, deduplication, expiry),
// reference.md (every SQL function and error code), notifier.md (email),
// events.md (the NATS documents and their delivery guarantees), go.md (Go
// handlers) and multi-master.md.
package pgrelay
