package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/events/store"
)

// DevStatements runs, on a migrated database, every statement `pgrelay dev`
// sends to its own (throwaway) database: the demo setup, the producer's, the
// live view's.
func DevStatements(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := store.DevDatabaseExists(ctx, pool); err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	if err := store.CreateDemo(ctx, pool); err != nil {
		return fmt.Errorf("dev setup: %w", err)
	}
	if err := store.SendDemoEmail(ctx, pool, "Customer <c@example.com>", "Order 1", "Thanks", "<p>Thanks</p>"); err != nil {
		return fmt.Errorf("dev send: %w", err)
	}
	if err := store.NotifyDemo(ctx, pool, "demo_orders", `{"seq": 1}`); err != nil {
		return fmt.Errorf("dev notify: %w", err)
	}
	if _, err := store.QueueStats(ctx, pool); err != nil {
		return fmt.Errorf("dev view: %w", err)
	}
	if _, err := store.LogCounts(ctx, pool); err != nil {
		return fmt.Errorf("dev view: %w", err)
	}
	return nil
}

// RenderDevView writes one frame of `pgrelay dev`'s live view of the database
// behind pool to w.
func RenderDevView(ctx context.Context, pool *pgxpool.Pool, w io.Writer) {
	(&devView{out: w, url: "test", demo: true}).render(ctx, pool)
}
