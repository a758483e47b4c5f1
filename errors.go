package pgrelay

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgrelay/pgrelay/internal/prcodes"
)

// codeError is a sentinel: one SQLSTATE of class PR and what it means.
type codeError struct {
	code string
	text string
}

func (e *codeError) Error() string { return e.text + " (" + e.code + ")" }

func newCode(code, text string) *codeError { return &codeError{code: code, text: text} }

// Sentinel errors, one per SQLSTATE of class PR that pgrelay's SQL functions
// raise (docs/reference.md, "Errors"). An error of this package that comes
// from such a refusal matches its sentinel with errors.Is, and still holds
// the server's *pgconn.PgError (message, hint, code) for errors.As.
//
// Channels and producers (pgrelay.register, update, unregister, notify,
// notify_many):
var (
	// ErrUnknownChannel (PR001): the channel is NULL or not registered.
	ErrUnknownChannel error = newCode(prcodes.UnknownChannel, "unknown channel")
	// ErrChannelPaused (PR002): no longer raised (a paused channel accepts
	// events and holds them); reserved: schema versions before 12 raised it.
	ErrChannelPaused error = newCode(prcodes.ChannelPaused, "channel is paused")
	// ErrChannelExists (PR003): register() of a channel that exists with a
	// different definition (an identical one is a no-op).
	ErrChannelExists error = newCode(prcodes.ChannelExists, "channel exists with a different definition")
	// ErrChannelNotEmpty (PR004): unregister() of a channel that still has
	// pending or in-flight events, without p_force.
	ErrChannelNotEmpty error = newCode(prcodes.ChannelNotEmpty, "channel still has events")
	// ErrNullPayload (PR005): a NULL payload or payload array.
	ErrNullPayload error = newCode(prcodes.NullPayload, "payload is NULL")
	// ErrPayloadTooLarge (PR006): a payload over 1 MiB.
	ErrPayloadTooLarge error = newCode(prcodes.PayloadTooLarge, "payload over 1 MiB")
	// ErrNotBeforeAndDelay (PR007): both NotBefore and Delay given.
	ErrNotBeforeAndDelay error = newCode(prcodes.NotBeforeAndDelay, "both a due time and a delay given")
	// ErrInvalidDueTime (PR008): a negative delay or an infinite due time.
	ErrInvalidDueTime error = newCode(prcodes.InvalidDueTime, "invalid due time")
	// ErrInvalidPriority (PR009): a priority outside -32768–32767.
	ErrInvalidPriority error = newCode(prcodes.InvalidPriority, "invalid priority")
	// ErrInvalidUniqueFor (PR024): a UniqueFor period that is not more than
	// zero and at most 3650 days.
	ErrInvalidUniqueFor error = newCode(prcodes.InvalidUniqueFor, "invalid unique-for period")
	// ErrInvalidChannelName (PR010): not 1 to 100 of A-Z a-z 0-9 _ -.
	ErrInvalidChannelName error = newCode(prcodes.InvalidChannelName, "invalid channel name")
	// ErrInvalidKind (PR011): a kind other than sql, email, nats or go.
	ErrInvalidKind error = newCode(prcodes.InvalidKind, "unknown channel kind")
	// ErrInvalidConcurrencyMode (PR012): not none, channel or payload.
	ErrInvalidConcurrencyMode error = newCode(prcodes.InvalidConcurrencyMode, "unknown concurrency mode")
	// ErrInvalidMaxAttempts (PR013): max_attempts NULL, not positive or over 1000.
	ErrInvalidMaxAttempts error = newCode(prcodes.InvalidMaxAttempts, "invalid max_attempts")
	// ErrInvalidTimeout (PR014): timeout NULL, not positive or over 24 hours.
	ErrInvalidTimeout error = newCode(prcodes.InvalidTimeout, "invalid timeout")
	// ErrInvalidRetryDelay (PR015): retry_delay NULL, negative or over 24 hours.
	ErrInvalidRetryDelay error = newCode(prcodes.InvalidRetryDelay, "invalid retry_delay")
	// ErrInvalidExpireAfter (PR016): expire_after not positive or over 365 days.
	ErrInvalidExpireAfter error = newCode(prcodes.InvalidExpireAfter, "invalid expire_after")
	// ErrInvalidHandler (PR017): an empty handler, a sql handler that is not
	// one preparable statement taking only $1, an invalid or reserved NATS
	// subject, or an invalid Go handler name.
	ErrInvalidHandler error = newCode(prcodes.InvalidHandler, "invalid handler")
	// ErrInvalidPublishErrors (PR018): publish_errors not class, text or none.
	ErrInvalidPublishErrors error = newCode(prcodes.InvalidPublishErrors, "invalid publish_errors")
	// ErrInvalidFlowLimit (PR019): max_in_flight or rate_limit negative, or
	// rate_period not positive, over 1 day or without a rate limit.
	ErrInvalidFlowLimit error = newCode(prcodes.InvalidFlowLimit, "invalid max_in_flight or rate limit")
)

// Nodes and Processors:
var (
	// ErrInvalidNodeID (PR020): pg_relay.node_id (or decommission()'s node)
	// is not an integer in 0–1023.
	ErrInvalidNodeID error = newCode(prcodes.InvalidNodeID, "invalid node id")
	// ErrUnknownMode (PR021): a Processor mode other than single,
	// multi-node or leader.
	ErrUnknownMode error = newCode(prcodes.UnknownMode, "unknown Processor mode")
	// ErrNodeAlive (PR022): decommission() of a node that heartbeated within
	// p_dead_after; stop its Processors first.
	ErrNodeAlive error = newCode(prcodes.NodeAlive, "node is alive")
	// ErrInvalidDeadAfter (PR023): decommission()'s p_dead_after is NULL,
	// zero or negative.
	ErrInvalidDeadAfter error = newCode(prcodes.InvalidDeadAfter, "invalid dead_after")
	// ErrClaimTakenBack (PR030): a claim was taken back before its handler's
	// transaction completed it (the Processor's own).
	ErrClaimTakenBack error = newCode(prcodes.ClaimTakenBack, "claim taken back")
	// ErrLeaseEnded (PR031): a leader's batch found the lease term it started
	// under ended (the Processor's own).
	ErrLeaseEnded error = newCode(prcodes.LeaseEnded, "leader lease ended")
	// ErrPublishHorizonBlind (PR040): the owner of pgrelay._publish_horizon()
	// cannot see other sessions' transactions; the hint is the GRANT to run.
	ErrPublishHorizonBlind error = newCode(prcodes.PublishHorizonBlind, "publish horizon cannot see other sessions")
)

// Dead letters (pgrelay.retry, retry_all, discard):
var (
	// ErrUnknownDeadLetter (PR050): retry() or discard() of an id that is
	// not a dead letter (never was, or was retried, discarded or trimmed).
	ErrUnknownDeadLetter error = newCode(prcodes.UnknownDeadLetter, "not a dead letter")
	// ErrDeadLetterNodeGone (PR051): retry() of a dead letter pinned to a
	// decommissioned node, where it could never run; discard it instead.
	ErrDeadLetterNodeGone error = newCode(prcodes.DeadLetterNodeGone, "dead letter pinned to a decommissioned node")
)

// Schedules (pgrelay.schedule; docs/user-guide.md, "Periodic events"):
var (
	// ErrInvalidScheduleName (PR060): a schedule name NULL or not 1 to 100
	// of A-Z a-z 0-9 _ . : -.
	ErrInvalidScheduleName error = newCode(prcodes.InvalidScheduleName, "invalid schedule name")
	// ErrInvalidScheduleTiming (PR061): neither or both of an interval and a
	// cron expression given.
	ErrInvalidScheduleTiming error = newCode(prcodes.InvalidScheduleTiming, "give exactly one of an interval and a cron expression")
	// ErrInvalidEvery (PR062): an interval under 1 second or with a negative
	// part.
	ErrInvalidEvery error = newCode(prcodes.InvalidEvery, "invalid schedule interval")
	// ErrInvalidCron (PR063): not a cron expression pgrelay accepts.
	ErrInvalidCron error = newCode(prcodes.InvalidCron, "invalid cron expression")
	// ErrInvalidTimezone (PR064): not a time zone name of pg_timezone_names.
	ErrInvalidTimezone error = newCode(prcodes.InvalidTimezone, "unknown time zone")
)

// The notifier (pgrelay_notifier.send, create_channel, set_status;
// docs/notifier.md, "What send() refuses"):
var (
	// ErrNotEmailChannel (PR100): the channel does not exist or is not an
	// email channel.
	ErrNotEmailChannel error = newCode(prcodes.NotEmailChannel, "not an email channel")
	// ErrNoRecipients (PR101): the To list is empty.
	ErrNoRecipients error = newCode(prcodes.NoRecipients, "no recipient")
	// ErrInvalidAddress (PR102): an address that is not an RFC 5322 mailbox,
	// or too long; the message names it.
	ErrInvalidAddress error = newCode(prcodes.InvalidAddress, "invalid address")
	// ErrInvalidSubject (PR103): a subject with CR or LF, or over 998 bytes.
	ErrInvalidSubject error = newCode(prcodes.InvalidSubject, "invalid subject")
	// ErrBodyTooLarge (PR104): a text or HTML body over 1 MiB.
	ErrBodyTooLarge error = newCode(prcodes.BodyTooLarge, "body over 1 MiB")
	// ErrInvalidHeaders (PR105): invalid custom headers, a header the
	// notifier sets itself, more than 50 or over 16 KiB together.
	ErrInvalidHeaders error = newCode(prcodes.InvalidHeaders, "invalid headers")
	// ErrTooManyRecipients (PR106): over 100 recipients in To, Cc and Bcc.
	ErrTooManyRecipients error = newCode(prcodes.TooManyRecipients, "over 100 recipients")
	// ErrNullBody (PR107): a NULL text body.
	ErrNullBody error = newCode(prcodes.NullBody, "text body is NULL")
	// ErrMessageTooLarge (PR108): the whole message over 2 MiB.
	ErrMessageTooLarge error = newCode(prcodes.MessageTooLarge, "message over 2 MiB")
	// ErrUnknownNotificationStatus (PR110): set_status() given a status other
	// than sending, sent or failed (the Processor's own).
	ErrUnknownNotificationStatus error = newCode(prcodes.UnknownNotificationStatus, "unknown notification status")
	// ErrArrayLengthsDiffer (PR111): notify_many() given a key array whose
	// length is not the payloads' (NotifyMany with Keys), or start_sending_many() or
	// set_status_many() given arrays of different lengths (the Processor's
	// own calls).
	ErrArrayLengthsDiffer error = newCode(prcodes.ArrayLengthsDiffer, "arrays of different lengths")
)

// sentinels lists every sentinel of a PR code: the set this package knows,
// which a test holds equal to the codes the migrations raise.
func sentinels() []error {
	return []error{
		ErrUnknownChannel, ErrChannelPaused, ErrChannelExists, ErrChannelNotEmpty,
		ErrNullPayload, ErrPayloadTooLarge, ErrNotBeforeAndDelay, ErrInvalidDueTime,
		ErrInvalidPriority, ErrInvalidUniqueFor,
		ErrInvalidChannelName, ErrInvalidKind, ErrInvalidConcurrencyMode,
		ErrInvalidMaxAttempts, ErrInvalidTimeout, ErrInvalidRetryDelay,
		ErrInvalidExpireAfter, ErrInvalidHandler, ErrInvalidPublishErrors,
		ErrInvalidFlowLimit,
		ErrInvalidNodeID, ErrUnknownMode, ErrNodeAlive, ErrInvalidDeadAfter,
		ErrClaimTakenBack, ErrLeaseEnded, ErrPublishHorizonBlind,
		ErrUnknownDeadLetter, ErrDeadLetterNodeGone,
		ErrInvalidScheduleName, ErrInvalidScheduleTiming, ErrInvalidEvery, ErrInvalidCron, ErrInvalidTimezone,
		ErrNotEmailChannel, ErrNoRecipients, ErrInvalidAddress, ErrInvalidSubject,
		ErrBodyTooLarge, ErrInvalidHeaders, ErrTooManyRecipients, ErrNullBody,
		ErrMessageTooLarge, ErrUnknownNotificationStatus, ErrArrayLengthsDiffer,
	}
}

// sentinelOf is the sentinel of SQLSTATE code, or nil.
func sentinelOf(code string) error {
	for _, s := range sentinels() {
		if s.(*codeError).code == code {
			return s
		}
	}
	return nil
}

// Other errors of this package.
var (
	// ErrNotFound: Status or EmailStatus found no status for the id (an
	// unknown id, one whose log rows were trimmed, or a notification the
	// caller may not see).
	ErrNotFound = errors.New("not found")
	// ErrMalformedEvent: ParseEvent was given something that is not a
	// pgrelay status-event document.
	ErrMalformedEvent = errors.New("not a pgrelay status-event document")
	// ErrUnsupportedSchema: ParseEvent was given a document of a schema
	// version newer than this package reads (its fields may have changed
	// meaning); a newer pgrelay module reads it.
	ErrUnsupportedSchema = errors.New("unsupported status-event schema")
)

// sqlError is a refusal of one of pgrelay's SQL functions: the server's error
// and the sentinel of its code, both reachable through the chain.
type sqlError struct {
	sentinel error
	err      error
}

func (e *sqlError) Error() string   { return e.err.Error() }
func (e *sqlError) Unwrap() []error { return []error{e.sentinel, e.err} }

// Classify returns err with the sentinel of its SQLSTATE attached when it
// holds a *pgconn.PgError of class PR, and err unchanged otherwise, for
// errors of pgrelay's SQL functions called without this package (register(),
// update(), ...):
//
//	_, err := pool.Exec(ctx, "SELECT pgrelay.register($1::text, $2::text)", name, handler)
//	if errors.Is(pgrelay.Classify(err), pgrelay.ErrChannelExists) { ... }
//
// The errors this package returns are classified already.
func Classify(err error) error {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return err
	}
	if s := sentinelOf(pgErr.Code); s != nil && !errors.Is(err, s) {
		return &sqlError{sentinel: s, err: err}
	}
	return err
}
