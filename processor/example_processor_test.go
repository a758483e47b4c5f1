package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/processor"
)

// exampleShopDB is a fresh migrated database for the order service of
// ExampleProcessor_HandleTx: the tables app.orders and app.shipments, and
// the go channel order_placed whose handler is "ship" (what the service's
// deployment would have set up).
func exampleShopDB() (url string, pool *pgxpool.Pool) {
	ctx := context.Background()
	url, err := pg.NewDatabase(ctx, "example_shop")
	if err != nil {
		log.Fatal(err)
	}
	if pool, err = pgxpool.New(ctx, url); err != nil {
		log.Fatal(err)
	}
	for _, sql := range []string{
		"CREATE SCHEMA app",
		"CREATE TABLE app.orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, customer text NOT NULL)",
		"CREATE TABLE app.shipments (order_id bigint PRIMARY KEY REFERENCES app.orders, event_id bigint NOT NULL)",
		"SELECT pgrelay.register('order_placed', 'ship', p_kind := 'go')",
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			log.Fatal(err)
		}
	}
	return url, pool
}

// An order service: placing an order enqueues order_placed in the order's
// transaction; the embedded Processor runs the Go handler "ship", whose
// shipment row commits in the same transaction as the event's success.
func ExampleProcessor_HandleTx() {
	ctx := context.Background()
	url, pool := exampleShopDB()
	defer pool.Close()

	p, err := processor.NewProcessor(processor.Config{
		DatabaseURL:  url,
		PollInterval: 100 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	p.HandleTx("ship", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
		var order struct {
			OrderID int64 `json:"order_id"`
		}
		if err := json.Unmarshal([]byte(ev.Payload), &order); err != nil {
			return pgrelay.Permanent(err) // retrying cannot fix the payload
		}
		_, err := tx.Exec(ctx, "INSERT INTO app.shipments (order_id, event_id) VALUES ($1, $2)",
			order.OrderID, ev.OriginID)
		return err // nil: the shipment and the event's success commit together
	})
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = p.Stop(ctx) }()

	// Place an order: the order and its event commit together.
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	var orderID int64
	if err := tx.QueryRow(ctx, "INSERT INTO app.orders (customer) VALUES ('ada') RETURNING id").Scan(&orderID); err != nil {
		log.Fatal(err)
	}
	id, err := pgrelay.Notify(ctx, tx, "order_placed", fmt.Sprintf(`{"order_id": %d}`, orderID))
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	// Wait for the event to complete.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		status, err := pgrelay.Status(wctx, pool, id)
		if err != nil {
			log.Fatal(err)
		}
		if status == pgrelay.StatusSucceeded {
			break
		}
		select {
		case <-tick.C:
		case <-wctx.Done():
			log.Fatal(wctx.Err())
		}
	}
	var shippedBy int64
	if err := pool.QueryRow(ctx, "SELECT event_id FROM app.shipments WHERE order_id = $1", orderID).Scan(&shippedBy); err != nil {
		log.Fatal(err)
	}
	fmt.Println("shipped by event", shippedBy == id)
	// Output: shipped by event true
}
