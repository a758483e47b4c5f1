package pgrelaytest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/pgrelaytest"
	"github.com/pgrelay/pgrelay/processor"
)

// The order service under test: placing an order enqueues order_placed in
// the order's transaction; the Go handler "ship" writes the shipment in the
// transaction that completes the event.

type orderPlaced struct {
	OrderID int64 `json:"order_id"`
}

func placeOrder(ctx context.Context, tx pgx.Tx, customer string) (int64, error) {
	var id int64
	if err := tx.QueryRow(ctx, "INSERT INTO app.orders (customer) VALUES ($1) RETURNING id", customer).Scan(&id); err != nil {
		return 0, err
	}
	_, err := pgrelay.NotifyJSON(ctx, tx, "order_placed", orderPlaced{OrderID: id})
	return id, err
}

func newProcessor(url string) (*processor.Processor, error) {
	p, err := processor.NewProcessor(processor.Config{DatabaseURL: url,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	processor.HandleTxJSON(p, "ship", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event, o orderPlaced) error {
		if o.OrderID == 0 {
			return pgrelay.Permanent(errors.New("no order"))
		}
		_, err := tx.Exec(ctx, "INSERT INTO app.shipments (order_id, event_id) VALUES ($1, $2)", o.OrderID, ev.OriginID)
		return err
	})
	return p, nil
}

// shopDB is the service's test database: pgrelay's schema, its tables and
// its channel, as its deployment sets them up.
func shopDB(ctx context.Context, name string) (url string, pool *pgxpool.Pool, err error) {
	if url, err = pg.NewDatabase(ctx, name); err != nil {
		return "", nil, err
	}
	if pool, err = pgxpool.New(ctx, url); err != nil {
		return "", nil, err
	}
	for _, sql := range []string{
		"CREATE SCHEMA app",
		"CREATE TABLE app.orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, customer text NOT NULL)",
		"CREATE TABLE app.shipments (order_id bigint PRIMARY KEY REFERENCES app.orders, event_id bigint NOT NULL)",
		"SELECT pgrelay.register('order_placed', 'ship', p_kind := 'go')",
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			pool.Close()
			return "", nil, err
		}
	}
	return url, pool, nil
}

// A test of the service: the order's transaction enqueued its event, and the
// handler ships it.
func TestPlaceOrderShips(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, pool, err := shopDB(ctx, "shop_test")
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	orderID, err := placeOrder(ctx, tx, "ada")
	require.NoError(t, err)
	evs := pgrelaytest.RequireNotified(t, tx, "order_placed", pgrelaytest.JSON(orderPlaced{OrderID: orderID}))
	require.Len(t, evs, 1)
	require.NoError(t, tx.Commit(ctx))

	p, err := newProcessor(url)
	require.NoError(t, err)
	outs, err := pgrelaytest.Work(ctx, p, "order_placed")
	require.NoError(t, err)
	require.Len(t, outs, 1)
	require.Equal(t, "succeeded", outs[0].Result)
	require.Equal(t, evs[0].OriginID, outs[0].Event.OriginID)
	status, err := pgrelay.Status(ctx, pool, evs[0].OriginID)
	require.NoError(t, err)
	require.Equal(t, pgrelay.StatusSucceeded, status)
	var shippedBy int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT event_id FROM app.shipments WHERE order_id = $1", orderID).Scan(&shippedBy))
	require.Equal(t, evs[0].OriginID, shippedBy)
}

// Work runs a channel's ready events through the program's handlers, now,
// and returns each outcome; pgrelay records them as in production.
func ExampleWork() {
	ctx := context.Background()
	url, pool, err := shopDB(ctx, "example_work")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := placeOrder(ctx, tx, "ada"); err != nil {
		log.Fatal(err)
	}
	// An event no handler can ship.
	if _, err := pgrelay.NotifyJSON(ctx, tx, "order_placed", orderPlaced{}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	p, err := newProcessor(url)
	if err != nil {
		log.Fatal(err)
	}
	outs, err := pgrelaytest.Work(ctx, p, "order_placed")
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range outs {
		fmt.Println(o.Event.Payload, o.Result, o.Err)
	}
	// Output:
	// {"order_id":1} succeeded <nil>
	// {"order_id":0} gave_up no order
}
