-- _expiry_of: a row's expires_at: its due time (the later of enqueued_at and
-- not_before) plus the channel's expire_after; NULL when the channel's events
-- never expire. The one statement of the rule, for the stamping trigger
-- (_queue_before_insert), _enqueue and _retry_dead. Inlined like _may_take
-- (LANGUAGE sql, no SET clause, SQL standard body).

CREATE OR REPLACE FUNCTION pgrelay._expiry_of(p_expire_after interval, p_enqueued_at timestamptz, p_not_before timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
RETURN GREATEST(p_enqueued_at, p_not_before) + p_expire_after;

REVOKE ALL ON FUNCTION pgrelay._expiry_of(interval, timestamp with time zone, timestamp with time zone) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
