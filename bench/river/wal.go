package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The cost of a phase in WAL and write transactions, measured as pgrelay's
// bench measures its own: the server's WAL insert position
// (pg_current_wal_insert_lsn(): what was written, flushed or not)
// and transaction id counter (the xmax of pg_current_snapshot(): every
// transaction that writes draws one, a read-only one does not) before and
// after the phase. Both are server-wide and exact at once (pg_stat_database
// counters reach the view up to a second late), so the phase is measured
// alone on the server: whatever else writes meanwhile (autovacuum, River's
// own maintenance) counts too.

// Names of the measured phases in result.Cost.
const (
	costInsertMany = "insert_many"
	costInsert     = "insert"
	costBurnDown   = "burn_down"
)

// walCost is what a phase wrote.
type walCost struct {
	Events     int   `json:"events"`
	WALBytes   int64 `json:"wal_bytes"`
	WriteXacts int64 `json:"write_xacts"`
	// FromUnixNS and ToUnixNS are when the phase's marks were read:
	// pgrelay's bench measures the server's CPU and the round trips
	// between them.
	FromUnixNS int64 `json:"from_unix_ns"`
	ToUnixNS   int64 `json:"to_unix_ns"`
}

// walMark is the server's WAL position and next transaction id at a moment.
type walMark struct {
	lsn int64
	xid int64
	at  time.Time
}

// markWAL reads the server's WAL position and next transaction id.
func markWAL(ctx context.Context, pool *pgxpool.Pool) (walMark, error) {
	var m walMark
	err := pool.QueryRow(ctx, `SELECT (pg_catalog.pg_current_wal_insert_lsn() - '0/0'::pg_catalog.pg_lsn)::pg_catalog.int8,
		pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::pg_catalog.text::pg_catalog.int8`).Scan(&m.lsn, &m.xid)
	if err != nil {
		return walMark{}, fmt.Errorf("read the WAL position and the transaction counter: %w", err)
	}
	m.at = time.Now()
	return m, nil
}

// recordCost marks the server again and records in res what was written
// since from, for events events, as phase name.
func recordCost(ctx context.Context, pool *pgxpool.Pool, res *result, name string, from walMark, events int) error {
	to, err := markWAL(ctx, pool)
	if err != nil {
		return err
	}
	if res.Cost == nil {
		res.Cost = map[string]*walCost{}
	}
	res.Cost[name] = &walCost{Events: events, WALBytes: to.lsn - from.lsn, WriteXacts: to.xid - from.xid,
		FromUnixNS: from.at.UnixNano(), ToUnixNS: to.at.UnixNano()}
	return nil
}

// reportCost prints the phases' costs per job.
func reportCost(w io.Writer, res *result) {
	names := make([]string, 0, len(res.Cost))
	for n := range res.Cost {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := res.Cost[n]
		if c.Events <= 0 {
			continue
		}
		fmt.Fprintf(w, "  cost:        %s: %.0f WAL bytes and %.4f write transactions per job\n", n,
			float64(c.WALBytes)/float64(c.Events), float64(c.WriteXacts)/float64(c.Events))
	}
}
