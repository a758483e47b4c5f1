-- _claim_allowance: how many of p_want events of ch, a limited channel, a
-- claim may start now (p_node, p_all, p_own: _claim_scope's). It locks the
-- channel's flow_locks row until the claim's transaction ends: the next claim
-- of the channel on this node waits, then counts what this one started.
-- A claim that starts any calls _claim_started before it commits.

CREATE OR REPLACE FUNCTION pgrelay._claim_allowance(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_want integer) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_n int := p_want;
  v_busy bigint;
  v_started bigint;
BEGIN
  IF ch.max_in_flight IS NULL AND ch.rate_limit IS NULL OR p_want <= 0 THEN
    RETURN p_want;
  END IF;
  PERFORM FROM pgrelay.flow_locks l WHERE l.channel = ch.channel FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO pgrelay.flow_locks (channel) VALUES (ch.channel) ON CONFLICT DO NOTHING;
    PERFORM FROM pgrelay.flow_locks l WHERE l.channel = ch.channel FOR UPDATE;
  END IF;
  IF ch.max_in_flight IS NOT NULL THEN
    -- A loose index scan over the Processors with rows in flight
    -- (queue_inflight), then the channel's rows of each.
    WITH RECURSIVE d(p) AS (
      (SELECT q.dispatched_by FROM pgrelay.queue q
        WHERE q.dispatched_at IS NOT NULL AND q.dispatched_by IS NOT NULL
        ORDER BY q.dispatched_by LIMIT 1)
      UNION ALL
      SELECT (SELECT q.dispatched_by FROM pgrelay.queue q
               WHERE q.dispatched_at IS NOT NULL AND q.dispatched_by > d.p
               ORDER BY q.dispatched_by LIMIT 1)
        FROM d WHERE d.p IS NOT NULL
    )
    SELECT count(*) INTO v_busy
      FROM d JOIN pgrelay.queue q ON q.dispatched_by = d.p
     WHERE q.channel = ch.channel AND q.dispatched_at IS NOT NULL
       AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own);
    v_n := LEAST(v_n, GREATEST(0, ch.max_in_flight - v_busy)::int);
  END IF;
  IF ch.rate_limit IS NOT NULL AND v_n > 0 THEN
    -- Starts are timed as their claims are (dispatched_at): now(), the
    -- claim transaction's start. A claim counts every start it can see
    -- within the period before its own time; those of a claim that began
    -- earlier but took the lock later count too. The rows are kept a minute
    -- longer than the period, for a claim that waited that long for the lock.
    DELETE FROM pgrelay.flow_starts s
     WHERE s.channel = ch.channel AND s.started_at < now() - ch.rate_period - interval '1 minute';
    SELECT COALESCE(sum(s.n), 0) INTO v_started FROM pgrelay.flow_starts s
     WHERE s.channel = ch.channel AND s.started_at > now() - ch.rate_period;
    v_n := LEAST(v_n, GREATEST(0, ch.rate_limit - v_started)::int);
  END IF;
  RETURN v_n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_allowance(pgrelay.channels, integer, boolean, boolean, integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_allowance(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_want integer) TO pgrelay_processor;
