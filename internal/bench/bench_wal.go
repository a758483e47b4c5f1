package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// What a measured phase costs the server: WAL bytes and write transactions
// per event, and how close the phase ran to the WAL flush.
//
// Both counters are server-wide and exact at once: the WAL position
// (pg_current_wal_insert_lsn(): what was written, flushed or not; the write
// position lags it with asynchronous commit) and the transaction id counter (the xmax of
// pg_current_snapshot(): every transaction that writes draws an id, a
// read-only one does not). pg_stat_database's counters reach the view up to
// a second late, so they are not used. The River harness measures its phases
// the same way (bench/river/wal.go). Whatever else writes during the phase
// (autovacuum, a Processor's heartbeat, River's maintenance) counts too:
// it is part of what the system costs.

// commitFloorN is how many one-row write transactions measure the commit
// floor.
const commitFloorN = 200

// walMark is the server's WAL position and next transaction id at a moment.
type walMark struct {
	lsn int64
	xid int64
	at  time.Time // when it was read: the meter's figures are taken at it
}

// eventCost is what a phase wrote, per event, and where it stands against
// the WAL flush.
type eventCost struct {
	WALBytes           int64   `json:"wal_bytes"`
	WriteXacts         int64   `json:"write_xacts"`
	WALBytesPerEvent   float64 `json:"wal_bytes_per_event"`
	WriteXactsPerEvent float64 `json:"write_xacts_per_event"`
	// CommitMS is a commit of a one-row write transaction on one
	// connection of this server, measured in the same scenario: its WAL
	// flush and a round trip. FlushLimit is the events/s the phase would
	// reach if each of its write transactions waited for such a commit in
	// turn; the phase's rate over it is how close it ran to the WAL flush
	// (over 1: its commits shared flushes, several connections at once).
	CommitMS   float64 `json:"commit_ms,omitempty"`
	FlushLimit float64 `json:"flush_limit_per_sec,omitempty"`
	// ServerCPUUSPerEvent is the server's CPU time per event, in µs, when
	// the server runs on this machine; RoundTripsPerEvent the measured
	// system's round trips per event, with --round-trips (bench_meter.go).
	ServerCPUUSPerEvent float64 `json:"server_cpu_us_per_event,omitempty"`
	RoundTripsPerEvent  float64 `json:"round_trips_per_event,omitempty"`
}

// mark is where a measured phase starts or ends: the server's WAL position
// and next transaction id, and a sample of the meter at that moment.
func (b *bench) mark(ctx context.Context) (walMark, error) {
	m, err := markWAL(ctx, b.pool)
	if err != nil {
		return walMark{}, err
	}
	m.at = b.meter.mark()
	return m, nil
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

// costSince is what the server wrote and spent since from, for events
// events, with a commit of commitMS (0: not measured).
func (b *bench) costSince(ctx context.Context, from walMark, events int64, commitMS float64) (*eventCost, error) {
	to, err := b.mark(ctx)
	if err != nil {
		return nil, err
	}
	c := newEventCost(to.lsn-from.lsn, to.xid-from.xid, events, commitMS)
	b.meter.add(c, from.at, to.at, events)
	return c, nil
}

// add sets c's server CPU and round trips per event, from from to to.
func (m *meter) add(c *eventCost, from, to time.Time, events int64) {
	if m == nil || c == nil || events <= 0 {
		return
	}
	cpu, turns, ok := m.between(from, to)
	if ok {
		c.ServerCPUUSPerEvent = round(cpu/float64(events), 2)
	}
	if m.proxy != nil {
		c.RoundTripsPerEvent = round(turns/float64(events), 4)
	}
}

func newEventCost(walBytes, xacts, events int64, commitMS float64) *eventCost {
	c := &eventCost{WALBytes: walBytes, WriteXacts: xacts, CommitMS: commitMS}
	if events > 0 {
		c.WALBytesPerEvent = round(float64(walBytes)/float64(events), 1)
		c.WriteXactsPerEvent = round(float64(xacts)/float64(events), 5)
	}
	if commitMS > 0 && c.WriteXactsPerEvent > 0 {
		c.FlushLimit = round(1000/commitMS/(float64(xacts)/float64(events)), 1)
	}
	return c
}

// riverCost is the cost of a phase of the River harness (its "cost"
// object), with the server CPU and round trips the meter saw between the
// phase's start and end.
func (b *bench) riverCost(c *riverPhaseCost, commitMS float64) *eventCost {
	if c == nil || c.Events <= 0 {
		return nil
	}
	ec := newEventCost(c.WALBytes, c.WriteXacts, int64(c.Events), commitMS)
	if c.FromUnixNS > 0 && c.ToUnixNS > c.FromUnixNS {
		b.meter.add(ec, time.Unix(0, c.FromUnixNS), time.Unix(0, c.ToUnixNS), int64(c.Events))
	}
	return ec
}

// riverPhaseCost is what one phase of the River harness wrote, and when it
// started and ended.
type riverPhaseCost struct {
	Events     int   `json:"events"`
	WALBytes   int64 `json:"wal_bytes"`
	WriteXacts int64 `json:"write_xacts"`
	FromUnixNS int64 `json:"from_unix_ns"`
	ToUnixNS   int64 `json:"to_unix_ns"`
}

// commitFloor measures a commit of a one-row write transaction on one
// connection (autocommit INSERTs into a table of the bench's own schema,
// dropped afterwards), in milliseconds: under synchronous_commit each waits
// for its WAL flush, so one connection commits at most 1000/commitFloor
// write transactions per second.
func (b *bench) commitFloor(ctx context.Context) (float64, error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("commit floor: connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS pgrelay_bench;
		DROP TABLE IF EXISTS pgrelay_bench.commit_floor;
		CREATE TABLE pgrelay_bench.commit_floor (n int NOT NULL)`); err != nil {
		return 0, fmt.Errorf("commit floor: create its table: %w", err)
	}
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error {
			_, err := conn.Exec(ctx, `DROP TABLE IF EXISTS pgrelay_bench.commit_floor`)
			_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS pgrelay_bench`) // kept while another scenario's table is in it
			return err
		})
	}()
	start := time.Now()
	for i := range commitFloorN {
		if _, err := conn.Exec(ctx, `INSERT INTO pgrelay_bench.commit_floor (n) VALUES ($1::int)`, i); err != nil {
			return 0, fmt.Errorf("commit floor: insert: %w", err)
		}
	}
	took := time.Since(start)
	if took <= 0 {
		return 0, errors.New("commit floor: no time elapsed")
	}
	return round(float64(took)/float64(time.Millisecond)/commitFloorN, 3), nil
}
