package store

import (
	"context"
	"fmt"
	"time"
)

// Traceparents is the producer's trace context (a W3C traceparent) of each
// of origins that has one (pgrelay.event_traces), in one query: what a
// tracing Processor links its spans to. Events without one are absent.
func Traceparents(ctx context.Context, q Querier, origins []int64) (map[int64]string, error) {
	rows, err := q.Query(ctx, `SELECT t.origin_id, t.traceparent FROM pgrelay.event_traces t
		WHERE t.origin_id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])`, origins)
	if err != nil {
		return nil, fmt.Errorf("read the trace context of %d events: %w", len(origins), err)
	}
	defer rows.Close()
	found := make(map[int64]string)
	for rows.Next() {
		var id int64
		var tp string
		if err := rows.Scan(&id, &tp); err != nil {
			return nil, fmt.Errorf("read the trace context of %d events: %w", len(origins), err)
		}
		found[id] = tp
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the trace context of %d events: %w", len(origins), err)
	}
	return found, nil
}

// Traceparents reads the trace context of origins on the hot pool
// (Traceparents).
func (s *Store) Traceparents(ctx context.Context, origins []int64) (map[int64]string, error) {
	return Traceparents(ctx, s.hot, origins)
}

// TrimEventTraces deletes up to batch trace contexts older than olderThan
// whose events have no queue row left (pgrelay._trim_event_traces).
func (s *Store) TrimEventTraces(ctx context.Context, olderThan time.Duration, batch int) (int, error) {
	var n int
	if err := s.bg.QueryRow(ctx, `SELECT pgrelay._trim_event_traces($1::pg_catalog.interval, $2::pg_catalog.int4)`,
		olderThan, batch).Scan(&n); err != nil {
		return 0, fmt.Errorf("trim trace contexts older than %s: %w", olderThan, err)
	}
	return n, nil
}
