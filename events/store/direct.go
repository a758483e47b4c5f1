package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ClaimScope says which rows a Processor may claim: its mode and, in leader
// mode, the lease term it believes it holds (0: not the leader).
type ClaimScope struct {
	Mode string
	Term int64
}

func (c ClaimScope) args() (leader bool, term *int64) {
	if c.Term > 0 {
		t := c.Term
		return true, &t
	}
	return false, nil
}

// DirectEvent is one event of a direct batch and what became of it.
type DirectEvent struct {
	ID         int64
	OriginID   int64
	Payload    string
	Attempt    int
	EnqueuedAt time.Time
	Expired    bool // past expires_at when claimed: recorded, not run

	// Outcome is what the batch recorded: "succeeded", "failed" (the log
	// says gave_up at the last attempt), "expired", or "" when the batch
	// recorded nothing (it failed; the event is pending again).
	Outcome string
	// Err is the handler's error of a failed event.
	Err error
}

// DirectBatch is a direct batch of one 'none' sql channel.
type DirectBatch struct {
	Channel     string
	Handler     string
	Timeout     time.Duration
	MaxAttempts int
	Events      []DirectEvent
	// Tries is how many pipelines the batch took (1 when no handler
	// failed).
	Tries int
	// Took is the batch's time once it had a connection.
	Took time.Duration
}

// RunDirect claims up to limit ready events of the 'none' sql channel by
// locking their rows in a transaction, runs each handler under its own
// savepoint with the channel's timeout as statement_timeout, and records
// every outcome in the same transaction: the handlers' effects and the
// completions commit together, with one commit for the batch. Nothing is
// written to claim the rows, so a Processor that dies mid-batch leaves them
// pending.
//
// The batch's statements go to the server in one pipeline. When a handler
// fails, the server skips the rest of the pipeline; the batch rolls back to
// that event's savepoint and sends the rest in a new pipeline.
//
// An error means the batch recorded nothing of what it had not committed:
// those events are pending again, no attempt counted. A batch that finds
// nothing to run returns an empty batch.
func (s *Store) RunDirect(ctx context.Context, scope ClaimScope, channel string, limit int) (*DirectBatch, error) {
	conn, err := s.hot.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire a connection for a batch of channel %s: %w", channel, err)
	}
	defer conn.Release()
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, directClaimTimeout)
	b, err := claimDirect(cctx, conn, scope, channel, limit)
	cancel()
	defer func() { b.Took = time.Since(start) }()
	if err != nil || len(b.Events) == 0 {
		rollback(ctx, conn)
		return b, err
	}
	// Each handler is cut by statement_timeout; the deadline bounds the
	// batch should the server or the network stop answering, so its locks
	// and slots are not held forever.
	rctx, cancel := context.WithTimeout(ctx, time.Duration(len(b.Events))*b.Timeout+directClaimTimeout)
	defer cancel()
	if err := b.run(rctx, conn); err != nil {
		return b, fmt.Errorf("batch of %d events of channel %s: %w", len(b.Events), channel, err)
	}
	return b, nil
}

// directClaimTimeout bounds a batch's claim, and is the margin of its
// deadline past its handlers' timeouts.
const directClaimTimeout = 30 * time.Second

func rollback(ctx context.Context, conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
}

func claimDirect(ctx context.Context, conn *pgxpool.Conn, scope ClaimScope, channel string, limit int) (*DirectBatch, error) {
	leader, term := scope.args()
	b := &DirectBatch{Channel: channel}
	batch := &pgx.Batch{}
	batch.Queue("BEGIN")
	batch.Queue("SELECT * FROM pgrelay._claim_direct($1, $2, $3, $4, $5)", channel, scope.Mode, leader, term, limit)
	br := conn.SendBatch(ctx, batch)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return b, fmt.Errorf("begin a batch of channel %s: %w", channel, err)
	}
	rows, err := br.Query()
	if err != nil {
		return b, fmt.Errorf("claim a batch of channel %s: %w", channel, err)
	}
	for rows.Next() {
		var e DirectEvent
		var timeoutMS int64
		if err := rows.Scan(&e.ID, &e.OriginID, &e.Payload, &e.Attempt, &e.EnqueuedAt, &e.Expired,
			&b.Handler, &timeoutMS, &b.MaxAttempts); err != nil {
			return b, fmt.Errorf("claim a batch of channel %s: %w", channel, err)
		}
		b.Timeout = time.Duration(timeoutMS) * time.Millisecond
		b.Events = append(b.Events, e)
	}
	if err := rows.Err(); err != nil {
		return b, fmt.Errorf("claim a batch of channel %s: %w", channel, err)
	}
	return b, br.Close()
}

// run runs the claimed batch on conn, whose transaction holds its rows.
// When a handler fails, the pipeline stops there: the transaction rolls back
// to that event's savepoint, keeping its locks and the effects of the events
// before it, and a new pipeline runs the rest. No handler runs twice, and a
// failure is recorded with the batch.
func (b *DirectBatch) run(ctx context.Context, conn *pgxpool.Conn) error {
	all := make([]int, len(b.Events))
	for i := range b.Events {
		if b.Events[i].Expired {
			b.Events[i].Outcome = "expired"
		}
		all[i] = i
	}
	for {
		b.Tries++
		k, done, err := b.pipeline(ctx, conn, all)
		if err == nil {
			for _, i := range all {
				if b.Events[i].Outcome == "" {
					b.Events[i].Outcome = "succeeded"
				}
			}
			return nil
		}
		var herr *HandlerError
		if k >= 0 && errors.As(err, &herr) {
			// The events before k ran; their effects stay in the transaction.
			for _, i := range done {
				b.Events[i].Outcome = "succeeded"
			}
			b.Events[k].Outcome, b.Events[k].Err = "failed", err
			_, err = conn.Exec(ctx, "ROLLBACK TO SAVEPOINT pgrelay_event")
			if err == nil {
				_, err = conn.Exec(ctx, "RELEASE SAVEPOINT pgrelay_event")
			}
			if err == nil {
				continue
			}
			err = fmt.Errorf("roll back a failed handler: %w", err)
		}
		rollback(ctx, conn)
		b.forget(all)
		return err
	}
}

// forget clears the outcomes of events that were not recorded after all.
func (b *DirectBatch) forget(idx []int) {
	for _, i := range idx {
		b.Events[i].Outcome, b.Events[i].Err = "", nil
	}
}

// pipeline runs the handlers of the events of idx without an outcome, and
// records every event of idx, then commits, in one round trip on conn's open
// transaction. On a handler failure it returns that event's index, the events
// that ran before it, and a *HandlerError; on any other failure -1 and the
// error.
func (b *DirectBatch) pipeline(ctx context.Context, conn *pgxpool.Conn, idx []int) (int, []int, error) {
	text := func(v string) []byte { return []byte(v) }
	var run []int
	ids := make([]string, len(idx))
	evs := make([]string, len(idx))
	errs := make([]string, len(idx))
	for j, i := range idx {
		e := &b.Events[i]
		ids[j] = strconv.FormatInt(e.ID, 10)
		switch e.Outcome {
		case "":
			run = append(run, i)
			evs[j], errs[j] = "succeeded", "NULL"
		case "failed":
			evs[j], errs[j] = "failed", arrayQuote(e.Err.Error())
		default:
			evs[j], errs[j] = e.Outcome, "NULL"
		}
	}
	timeout := max(b.Timeout.Milliseconds(), 1)
	pb := &pgconn.Batch{}
	if len(run) > 0 {
		pb.ExecParams("SET LOCAL statement_timeout = "+strconv.FormatInt(timeout, 10), nil, nil, nil, nil)
		for _, i := range run {
			pb.ExecParams("SAVEPOINT pgrelay_event", nil, nil, nil, nil)
			// $1 is declared text, as register() checked it with PREPARE (text).
			pb.ExecParams(b.Handler, [][]byte{text(b.Events[i].Payload)}, []uint32{pgtype.TextOID}, nil, nil)
			pb.ExecParams("RELEASE SAVEPOINT pgrelay_event", nil, nil, nil, nil)
		}
	}
	// Reset even when nothing runs: a handler's failure skipped the last reset.
	pb.ExecParams("SET LOCAL statement_timeout = 0", nil, nil, nil, nil)
	pb.ExecParams("SELECT pgrelay._complete(NULL, $1, NULL, $2, $3)",
		[][]byte{text("{" + strings.Join(ids, ",") + "}"), text("{" + strings.Join(evs, ",") + "}"),
			text("{" + strings.Join(errs, ",") + "}")},
		[]uint32{pgtype.Int8ArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID}, nil, nil)
	pb.ExecParams("COMMIT", nil, nil, nil, nil)
	head := 0
	if len(run) > 0 {
		head = 1
	}
	want := head + 3*len(run) + 3
	results, err := conn.Conn().PgConn().ExecBatch(ctx, pb).ReadAll()
	failed, err := firstError(results, err)
	if err == nil && len(results) != want {
		err = fmt.Errorf("expected %d results, got %d", want, len(results))
	}
	if err == nil {
		if tag := results[want-1].CommandTag.String(); tag != "COMMIT" {
			err = fmt.Errorf("the transaction ended with %s", tag)
		}
	}
	if err == nil {
		return -1, nil, nil
	}
	if failed >= head && failed < head+3*len(run) && (failed-head)%3 == 1 {
		j := (failed - head) / 3
		return run[j], run[:j], &HandlerError{Err: err}
	}
	return -1, nil, err
}

// arrayQuote quotes s as an element of a PostgreSQL array literal.
func arrayQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// firstError finds which statement of a pipeline failed: the one whose result
// holds an error, or, for a server error raised before a statement's result
// began (a handler failing while it is planned, as 1/0 does), the statement
// after the last result. -1 when it is not a statement's error.
func firstError(results []*pgconn.Result, err error) (int, error) {
	for j, r := range results {
		if r.Err != nil {
			return j, r.Err
		}
	}
	var pgErr *pgconn.PgError
	if err != nil && errors.As(err, &pgErr) {
		return len(results), err
	}
	return -1, err
}
