// Package prcodes names the SQLSTATEs of class PR that pgrelay's SQL
// functions raise on purpose, once, for the Go code that branches on them.
// Applications use the sentinel errors of the root package
// (github.com/pgrelay/pgrelay), which are built from these constants;
// docs/reference.md says what each code means.
package prcodes

// Channels and producers (pgrelay.register, update, unregister, notify,
// notify_many).
const (
	UnknownChannel         = "PR001"
	ChannelPaused          = "PR002" // no longer raised: a paused channel accepts events; reserved
	ChannelExists          = "PR003"
	ChannelNotEmpty        = "PR004"
	NullPayload            = "PR005"
	PayloadTooLarge        = "PR006"
	NotBeforeAndDelay      = "PR007"
	InvalidDueTime         = "PR008"
	InvalidPriority        = "PR009"
	InvalidChannelName     = "PR010"
	InvalidKind            = "PR011"
	InvalidConcurrencyMode = "PR012"
	InvalidMaxAttempts     = "PR013"
	InvalidTimeout         = "PR014"
	InvalidRetryDelay      = "PR015"
	InvalidExpireAfter     = "PR016"
	InvalidHandler         = "PR017"
	InvalidPublishErrors   = "PR018"
	InvalidFlowLimit       = "PR019"
	InvalidUniqueFor       = "PR024" // notify()'s p_unique_for: after the nodes' codes, taken before it
)

// Nodes and Processors.
const (
	InvalidNodeID    = "PR020"
	UnknownMode      = "PR021"
	NodeAlive        = "PR022"
	InvalidDeadAfter = "PR023"
	// ClaimTakenBack: pgrelay._succeed found the claim taken back before
	// the handler's transaction completed it.
	ClaimTakenBack = "PR030"
	// LeaseEnded: pgrelay._batch_fence found that this node no longer holds
	// the leader lease term the batch started under.
	LeaseEnded = "PR031"
	// PublishHorizonBlind: the owner of pgrelay._publish_horizon() cannot
	// see other sessions' transactions; the error's hint is the GRANT.
	PublishHorizonBlind = "PR040"
)

// Dead letters (pgrelay.retry, retry_all, discard).
const (
	// UnknownDeadLetter: the id is not a dead letter (never was, or was
	// retried, discarded or trimmed already).
	UnknownDeadLetter = "PR050"
	// DeadLetterNodeGone: retry() of a dead letter pinned to a node that was
	// decommissioned: the row could never run.
	DeadLetterNodeGone = "PR051"
)

// Schedules (pgrelay.schedule).
const (
	// InvalidScheduleName: NULL or not 1 to 100 of A-Z a-z 0-9 _ . : -.
	InvalidScheduleName = "PR060"
	// InvalidScheduleTiming: neither or both of p_every and p_cron.
	InvalidScheduleTiming = "PR061"
	// InvalidEvery: p_every under 1 second or with a negative part.
	InvalidEvery = "PR062"
	// InvalidCron: p_cron is not a cron expression pgrelay accepts.
	InvalidCron = "PR063"
	// InvalidTimezone: p_timezone is not a name of pg_timezone_names.
	InvalidTimezone = "PR064"
)

// The notifier (pgrelay_notifier.send, create_channel, set_status).
const (
	NotEmailChannel           = "PR100"
	NoRecipients              = "PR101"
	InvalidAddress            = "PR102"
	InvalidSubject            = "PR103"
	BodyTooLarge              = "PR104"
	InvalidHeaders            = "PR105"
	TooManyRecipients         = "PR106"
	NullBody                  = "PR107"
	MessageTooLarge           = "PR108"
	UnknownNotificationStatus = "PR110"
	ArrayLengthsDiffer        = "PR111"
)

// Internal is raised and caught inside one SQL function (pgrelay._next_id_at,
// to roll back the row locks it took): it never reaches a caller, so no Go
// code branches on it.
const Internal = "PR099"
