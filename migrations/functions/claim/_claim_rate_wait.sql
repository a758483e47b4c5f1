-- _claim_rate_wait: for _claim_rate_rows, after a claim visited ch, a
-- rate-limited channel: the milliseconds (rounded up, 0 if already past)
-- until its window has room again, when its claims within the period
-- (this claim's included) fill it and it has rows for p_node (_claim_scope's
-- p_all, p_own) not dispatched and due by then; NULL otherwise. Measured
-- from clock_timestamp(), so that a Processor waits that long from when the
-- answer arrives, whatever its clock. The window has room once enough of
-- its oldest starts are a period old: a claim at now() counts the starts
-- after now() - rate_period (_claim_allowance).

CREATE OR REPLACE FUNCTION pgrelay._claim_rate_wait(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_at timestamptz;
BEGIN
  IF ch.rate_limit IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT w.started_at + ch.rate_period INTO v_at
    FROM (SELECT s.started_at,
                 pg_catalog.sum(s.n) OVER (ORDER BY s.started_at ROWS UNBOUNDED PRECEDING) AS upto,
                 pg_catalog.sum(s.n) OVER () AS total
            FROM pgrelay.flow_starts s
           WHERE s.channel = ch.channel AND s.started_at > pg_catalog.now() - ch.rate_period) w
   WHERE w.total >= ch.rate_limit AND w.total - w.upto < ch.rate_limit
   ORDER BY w.started_at
   LIMIT 1;
  IF v_at IS NULL OR NOT EXISTS (
       SELECT FROM pgrelay.queue q
        WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.not_before <= v_at
          AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)) THEN
    RETURN NULL;
  END IF;
  RETURN GREATEST(0, pg_catalog.ceil(EXTRACT(epoch FROM v_at - pg_catalog.clock_timestamp()) * 1000))::bigint;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_rate_wait(pgrelay.channels, integer, boolean, boolean) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_rate_wait(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean) TO pgrelay_processor;
