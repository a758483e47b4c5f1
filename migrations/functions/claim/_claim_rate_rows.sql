-- _claim_rate_rows: the rows _claim and _claim_channel return last, after
-- their claimed rows: one per channel of p_channels whose rate window is
-- full while it has rows for p_node (_claim_rate_wait), with a NULL id, the
-- channel (kind, handler, concurrency_mode) and rate_wait_ms.

CREATE OR REPLACE FUNCTION pgrelay._claim_rate_rows(p_channels text[], p_node integer, p_all boolean, p_own boolean) RETURNS TABLE(id bigint, origin_id bigint, channel text, payload text, attempt integer, enqueued_at timestamp with time zone, dispatched_at timestamp with time zone, expired boolean, kind text, handler text, concurrency_mode text, timeout_ms bigint, max_attempts integer, rate_wait_ms bigint)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT NULL::bigint, NULL::bigint, c.channel, NULL::text, NULL::integer, NULL::timestamptz,
         NULL::timestamptz, NULL::boolean, c.kind, c.handler, c.concurrency_mode, NULL::bigint,
         NULL::integer, w.ms
    FROM pgrelay.channels c
   CROSS JOIN LATERAL (SELECT pgrelay._claim_rate_wait(c, p_node, p_all, p_own) AS ms) w
   WHERE c.channel = ANY (p_channels) AND w.ms IS NOT NULL;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_rate_rows(text[], integer, boolean, boolean) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_rate_rows(p_channels text[], p_node integer, p_all boolean, p_own boolean) TO pgrelay_processor;
