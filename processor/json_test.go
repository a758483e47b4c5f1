package processor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/processor"
)

type shipment struct {
	OrderID int64  `json:"order_id"`
	Carrier string `json:"carrier"`
}

// HandleJSON gets the value NotifyJSON enqueued.
func TestHandleJSONDecodesThePayload(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go')")
	got := make(chan shipment, 1)
	startGo(t, d.URL, func(p *processor.Processor) {
		processor.HandleJSON(p, "ship", func(ctx context.Context, ev pgrelay.Event, s shipment) error {
			got <- s
			return nil
		})
	})
	id, err := pgrelay.NotifyJSON(context.Background(), d.Pool, "ship", shipment{OrderID: 7, Carrier: "owl"})
	require.NoError(t, err)
	waitEnded(t, d, id)
	require.Equal(t, []string{"succeeded"}, logEvents(t, d, id))
	require.Equal(t, shipment{OrderID: 7, Carrier: "owl"}, <-got)
}

// HandleTxJSON writes in the completing transaction as HandleTx does; a
// payload that does not decode gives up at once, without calling the
// function, with an error naming the type and the decoder's error.
func TestHandleTxJSONGivesUpOnAPayloadThatDoesNotDecode(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go', p_max_attempts := 5)")
	startGo(t, d.URL, func(p *processor.Processor) {
		processor.HandleTxJSON(p, "ship", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event, s shipment) error {
			if s.Carrier == "" {
				return errors.New("called without a carrier")
			}
			_, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", s.OrderID, ev.Attempt)
			return err
		})
	})
	good := notify(t, d, "ship", `{"order_id": 8, "carrier": "owl"}`)
	bad := notify(t, d, "ship", `{"order_id": "eight"}`)
	waitEnded(t, d, good)
	waitEnded(t, d, bad)
	require.Equal(t, []string{"succeeded"}, logEvents(t, d, good))
	require.Equal(t, []int64{8}, testenv.Column[int64](t, d.Pool, "SELECT origin_id FROM app.shipments"))
	require.Equal(t, []string{"gave_up"}, logEvents(t, d, bad), "no attempt is retried")
	require.Regexp(t, `^payload of event [0-9]+ is not a JSON processor_test\.shipment: json: cannot unmarshal string into Go struct field shipment\.order_id of type int64$`,
		d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1", bad))
}
