CREATE OR REPLACE FUNCTION pgrelay._expiry_of(p_expire_after interval, p_enqueued_at timestamptz, p_not_before timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
RETURN GREATEST(p_enqueued_at, p_not_before) + p_expire_after;

REVOKE ALL ON FUNCTION pgrelay._expiry_of(interval, timestamp with time zone, timestamp with time zone) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
