-- _claim_lanes_direct: the heads of the ready lanes of the serialised sql
-- channels, one event per lane, for a lane batch; a channel with flow
-- limits is _claim's, not a batch's.

CREATE OR REPLACE FUNCTION pgrelay._claim_lanes_direct(p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_after_channel text, p_after_lane bigint) RETURNS TABLE(id bigint, origin_id bigint, channel text, lane bigint, payload text, attempt integer, enqueued_at timestamp with time zone, expired boolean, handler text, timeout_ms bigint, max_attempts integer)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool;
  v_own bool;
  v_ch text := p_after_channel;
  v_lane bigint := p_after_lane;
  v_wrapped bool := p_after_channel IS NULL;
  v_n int := 0;
  v_got int;
  v_steps int := 0;
  r record;
  ch pgrelay.channels;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  IF p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  IF v_ch IS NOT NULL AND v_lane IS NULL THEN
    v_lane := -9223372036854775808;
  END IF;
  -- A loose index scan over queue_lane: one probe per lane, however long the
  -- lanes are. Bounded, so a queue full of lanes this batch cannot serve
  -- costs a bounded claim.
  WHILE v_n < p_limit AND v_steps < 4 * p_limit + 64 LOOP
    v_steps := v_steps + 1;
    IF v_ch IS NULL THEN
      SELECT q.channel, q.lane INTO r FROM pgrelay.queue q
       WHERE q.dispatched_at IS NULL AND q.lane IS NOT NULL
       ORDER BY q.channel, q.lane LIMIT 1;
    ELSE
      SELECT q.channel, q.lane INTO r FROM pgrelay.queue q
       WHERE q.dispatched_at IS NULL AND q.lane IS NOT NULL AND (q.channel, q.lane) > (v_ch, v_lane)
       ORDER BY q.channel, q.lane LIMIT 1;
    END IF;
    IF NOT FOUND THEN
      EXIT WHEN v_wrapped;
      v_wrapped := true;
      v_ch := NULL;
      v_lane := NULL;
      CONTINUE;
    END IF;
    v_ch := r.channel;
    v_lane := r.lane;
    -- Once around: stop where the walk began.
    EXIT WHEN v_wrapped AND p_after_channel IS NOT NULL
          AND (v_ch, v_lane) > (p_after_channel, COALESCE(p_after_lane, -9223372036854775808));
    IF ch.channel IS DISTINCT FROM v_ch THEN
      ch := NULL;
      SELECT * INTO ch FROM pgrelay.channels c WHERE c.channel = v_ch;
    END IF;
    CONTINUE WHEN ch.channel IS NULL OR ch.paused OR ch.kind <> 'sql'
               OR ch.concurrency_mode NOT IN ('channel', 'payload')
               OR ch.max_in_flight IS NOT NULL OR ch.rate_limit IS NOT NULL;
    RETURN QUERY
    WITH head AS (
      SELECT h.id FROM pgrelay._lane_head(v_ch, v_lane, v_node, v_all, v_own) h
    )
    SELECT q.id, q.origin_id, q.channel, q.lane, q.payload, q.attempt, q.enqueued_at,
           COALESCE(q.expires_at <= now(), false), ch.handler,
           (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint, ch.max_attempts
      FROM pgrelay.queue q JOIN head ON q.id = head.id
     WHERE q.not_before <= now() AND q.dispatched_at IS NULL
       FOR UPDATE OF q SKIP LOCKED;
    GET DIAGNOSTICS v_got = ROW_COUNT;
    v_n := v_n + v_got;
  END LOOP;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_lanes_direct(text, boolean, bigint, integer, text, bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_lanes_direct(p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_after_channel text, p_after_lane bigint) TO pgrelay_processor;
