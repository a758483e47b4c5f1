-- create_channel: registers an email channel whose From address is p_from.
-- Every other parameter is pgrelay.register()'s and passes through by name.
-- Email channels stay unrestricted by default (email has no node-local
-- state), and ride out an hour of SMTP trouble: 10 attempts from 10 seconds,
-- whose waits (pgrelay._backoff) between the first and the last attempt add
-- up to 10 s x (2^9 - 1) = 5110 s nominal, 4088 s at the lowest jitter
-- (docs/notifier.md). SECURITY INVOKER: the caller needs the right to call
-- pgrelay.register().

CREATE OR REPLACE FUNCTION pgrelay_notifier.create_channel(p_channel text, p_from text, p_concurrency_mode text DEFAULT 'none'::text, p_deduplicate boolean DEFAULT false, p_node_restricted boolean DEFAULT false, p_max_attempts integer DEFAULT 10, p_retry_delay interval DEFAULT '00:00:10'::interval, p_expire_after interval DEFAULT NULL::interval, p_timeout interval DEFAULT '00:00:30'::interval, p_publish_payload boolean DEFAULT false, p_publish_errors text DEFAULT 'class'::text, p_publish_enqueued boolean DEFAULT false, p_priority integer DEFAULT 0, p_max_in_flight integer DEFAULT NULL::integer, p_rate_limit integer DEFAULT NULL::integer, p_rate_period interval DEFAULT NULL::interval, p_store_traces boolean DEFAULT NULL::boolean) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM pgrelay_notifier._check_address('from', p_from);
  PERFORM pgrelay.register(
    p_channel := p_channel,
    p_handler := pg_catalog.btrim(p_from),
    p_kind := 'email',
    p_concurrency_mode := p_concurrency_mode,
    p_deduplicate := p_deduplicate,
    p_node_restricted := p_node_restricted,
    p_max_attempts := p_max_attempts,
    p_retry_delay := p_retry_delay,
    p_expire_after := p_expire_after,
    p_timeout := p_timeout,
    p_publish_payload := p_publish_payload,
    p_publish_errors := p_publish_errors,
    p_publish_enqueued := p_publish_enqueued,
    p_priority := p_priority,
    p_max_in_flight := p_max_in_flight,
    p_rate_limit := p_rate_limit,
    p_rate_period := p_rate_period,
    p_store_traces := p_store_traces);
END
$$;

ALTER FUNCTION pgrelay_notifier.create_channel(text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, text, boolean, integer, integer, integer, interval, boolean) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.create_channel(text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, text, boolean, integer, integer, integer, interval, boolean) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier.create_channel(p_channel text, p_from text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean) TO pgrelay_admin;
