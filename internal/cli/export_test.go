package cli

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/events/store"
)

// DevStatements runs, on a migrated database, every statement `pgrelay dev`
// sends to its own (throwaway) database: the demo setup, the producer's, the
// live view's.
func DevStatements(ctx context.Context, pool *pgxpool.Pool) error {
	var exists bool
	if err := pool.QueryRow(ctx, devExistsSQL).Scan(&exists); err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	if _, err := pool.Exec(ctx, devSetup); err != nil {
		return fmt.Errorf("dev setup: %w", err)
	}
	if _, err := pool.Exec(ctx, devSendSQL, "Customer <c@example.com>", "Order 1", "Thanks", "<p>Thanks</p>"); err != nil {
		return fmt.Errorf("dev send: %w", err)
	}
	if _, err := pool.Exec(ctx, devNotifySQL, "demo_orders", `{"seq": 1}`); err != nil {
		return fmt.Errorf("dev notify: %w", err)
	}
	if _, err := store.QueueStats(ctx, pool); err != nil {
		return fmt.Errorf("dev view: %w", err)
	}
	rows, err := pool.Query(ctx, devDoneSQL)
	if err != nil {
		return fmt.Errorf("dev view: %w", err)
	}
	rows.Close()
	return rows.Err()
}
