package cli

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay/events/store"
)

// connect opens a command's session with pgrelay's own search_path
// (store.SearchPath): its statements never resolve to objects of a schema
// on the login's search_path.
func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("invalid --database-url: %w", err)
	}
	store.PinSearchPath(cfg)
	return pgx.ConnectConfig(ctx, cfg)
}
