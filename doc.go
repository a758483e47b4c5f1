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
// NotifyMany enqueues a batch in one call; NotBefore and Delay make events
// due later. Status tells where an event stands. Send composes an email on an
// email channel the same way; EmailStatus and CancelEmail follow it.
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
// A program can run events itself: NewProcessor embeds a Processor (the
// Config of `pgrelay run`), and channels of kind go
// (pgrelay.register('order_placed', 'ship', p_kind := 'go')) run the
// function registered under their handler name:
//
//	p, err := pgrelay.NewProcessor(pgrelay.Config{DatabaseURL: url})
//	...
//	p.HandleTx("ship", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
//		_, err := tx.Exec(ctx, "INSERT INTO app.shipments ...", ev.Payload)
//		return err // the write commits with the event's success, or not at all
//	})
//	err = p.Start(ctx)
//	...
//	defer p.Stop(ctx)
//
// Handle registers a function for work outside the database (at least
// once: make it idempotent with ev.OriginID); HandleTxBatch one that runs
// the events of a claim in one transaction. A handler's error is a failed
// attempt, retried with the channel's backoff; RetryAfter sets the retry's
// delay and Permanent gives up at once. docs/go.md has the whole story.
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
