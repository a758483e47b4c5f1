-- _notification_of: the notification an event of a channel of kind p_kind
-- carries (an email event's payload is its notification id), else NULL.
-- Inlined like _lane_of.

CREATE OR REPLACE FUNCTION pgrelay._notification_of(p_kind text, p_payload text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_kind = 'email' AND p_payload ~ '^[0-9]{1,18}$' THEN p_payload::bigint END;

REVOKE ALL ON FUNCTION pgrelay._notification_of(text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._notification_of(p_kind text, p_payload text) TO pgrelay_processor;
