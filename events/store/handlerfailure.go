package store

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// handlerFailure is what the error a handler's statement failed with means
// for its event. A single event (RunSQL) and a batch (DirectBatch.run) decide
// by classifyHandlerError alike.
type handlerFailure int

const (
	// handlerOwn: the handler's own error, its session intact: a failed
	// attempt.
	handlerOwn handlerFailure = iota
	// handlerSessionEnded: the session ended while the handler ran. The
	// handler's doing (a failed attempt, HandlerConnLostError) when the
	// server has been up since before it ran; a restart's otherwise (no
	// attempt, the event is pending again).
	handlerSessionEnded
	// handlerCrashOfAnother: the server ended every session because another
	// backend crashed: not the handler's doing, no attempt.
	handlerCrashOfAnother
)

// classifyHandlerError classifies err, which a handler's statement failed
// with on pc.
func classifyHandlerError(pc *pgconn.PgConn, err error) handlerFailure {
	switch {
	case !sessionGone(pc, err):
		return handlerOwn
	case isCrashOfAnother(err):
		return handlerCrashOfAnother
	}
	return handlerSessionEnded
}

// sessionGone reports whether the session of pc is gone after err.
func sessionGone(pc *pgconn.PgConn, err error) bool {
	return pc.IsClosed() || IsConnError(err)
}

// isCrashOfAnother reports whether err is the server ending every session
// because another backend crashed: not the failed handler's doing.
func isCrashOfAnother(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57P02"
}
