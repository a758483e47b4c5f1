package bench

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// StartRTProxy starts a round-trip counting proxy to dbURL: its URL, its
// count so far, and its stop.
func StartRTProxy(dbURL string) (url string, turns func() int64, stop func(), err error) {
	p, u, err := startProxy(dbURL)
	if err != nil {
		return "", nil, nil, err
	}
	return u, p.turns.Load, p.close, nil
}

// MeterServer starts a meter of the server behind pool: a function that
// gives the server's CPU (µs) since the meter started, whether it could
// read it, and the meter's stop.
func MeterServer(ctx context.Context, pool *pgxpool.Pool) (since func() (float64, bool), stop func(), err error) {
	m, err := startMeter(ctx, pool, nil)
	if err != nil {
		return nil, nil, err
	}
	from := time.Now()
	return func() (float64, bool) {
		cpu, _, ok := m.between(from, time.Now())
		return cpu, ok
	}, m.close, nil
}

// ServerCPUNS reads the CPU time of the server behind pool, in nanoseconds,
// as the meter samples it.
func ServerCPUNS(ctx context.Context, pool *pgxpool.Pool) (func() (int64, error), error) {
	var backend int
	if err := pool.QueryRow(ctx, `SELECT pg_catalog.pg_backend_pid()`).Scan(&backend); err != nil {
		return nil, err
	}
	pm := localPostmaster(backend)
	if pm == 0 {
		return nil, errors.New("the server does not run on this machine")
	}
	return newCPUReader(pm).read, nil
}
