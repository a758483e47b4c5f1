-- _claim_lanes_direct: the heads of the ready lanes of the serialised sql
-- channels, one event per lane, for a lane batch; a channel with flow
-- limits is _claim's, not a batch's. Priority orders the lanes by their
-- heads, as the classic
-- claim orders a 'payload' channel's (_claim): first the lanes whose head
-- has a priority above 0, highest first (then oldest); then the walk over
-- the lanes from p_after_channel/p_after_lane, passing over the heads of a
-- priority below 0; then, while there is room, those, highest first. A
-- lane stays FIFO: its head is taken or nothing. The first and last steps
-- probe queue_priority once per serialised sql channel and find nothing
-- there unless the channel has rows of a priority other than 0, so a queue
-- without priorities is walked as before.

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
  v_taken bigint[] := '{}';
  v_sign int;
  v_lo smallint;
  v_hi smallint;
  r record;
  hp record;
  ch pgrelay.channels;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  IF p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  IF v_ch IS NOT NULL AND v_lane IS NULL THEN
    v_lane := -9223372036854775808;
  END IF;

  FOREACH v_sign IN ARRAY ARRAY[1, 0, -1] LOOP
    EXIT WHEN v_n >= p_limit;
    IF v_sign <> 0 THEN
      v_lo := CASE WHEN v_sign > 0 THEN 1 ELSE -32768 END;
      v_hi := CASE WHEN v_sign > 0 THEN 32767 ELSE -1 END;
      -- The heads of a priority above (below) 0: the lanes holding the
      -- channels' rows of that sign, a bounded number, and their heads of
      -- that sign in priority order. Each is locked, ready, or passed over.
      FOR hp IN
        SELECT y.id, y.channel, y.priority
          FROM pgrelay.channels c
         CROSS JOIN LATERAL (
           SELECT DISTINCT x.lane
             FROM (SELECT q.lane FROM pgrelay.queue q
                    WHERE q.channel = c.channel AND q.dispatched_at IS NULL
                      AND q.priority <> 0 AND q.priority BETWEEN v_lo AND v_hi
                    ORDER BY q.priority DESC, q.not_before, q.id
                    LIMIT p_limit) x
            WHERE x.lane IS NOT NULL) l
         CROSS JOIN LATERAL pgrelay._lane_head(c.channel, l.lane, v_node, v_all, v_own) hd
          JOIN pgrelay.queue y ON y.id = hd.id
         WHERE c.kind = 'sql' AND NOT c.paused AND c.concurrency_mode IN ('channel', 'payload')
           AND c.max_in_flight IS NULL AND c.rate_limit IS NULL
           AND y.priority BETWEEN v_lo AND v_hi AND y.id <> ALL (v_taken)
         ORDER BY y.priority DESC, c.priority DESC, y.origin_id, y.id
      LOOP
        EXIT WHEN v_n >= p_limit;
        IF ch.channel IS DISTINCT FROM hp.channel THEN
          SELECT * INTO ch FROM pgrelay.channels c WHERE c.channel = hp.channel;
        END IF;
        RETURN QUERY
        SELECT q.id, q.origin_id, q.channel, q.lane, q.payload, q.attempt, q.enqueued_at,
               COALESCE(q.expires_at <= now(), false), ch.handler,
               (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint, ch.max_attempts
          FROM pgrelay.queue q
         WHERE q.id = hp.id AND q.not_before <= now() AND q.dispatched_at IS NULL
           FOR UPDATE OF q SKIP LOCKED;
        GET DIAGNOSTICS v_got = ROW_COUNT;
        IF v_got > 0 THEN
          v_n := v_n + 1;
          v_taken := v_taken || hp.id;
        END IF;
      END LOOP;
      ch := NULL;
      CONTINUE;
    END IF;

    -- The walk: a loose index scan over queue_lane, one probe per lane,
    -- however long the lanes are. Bounded, so a queue full of lanes this
    -- batch cannot serve costs a bounded claim.
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
      -- A head taken above is this transaction's (SKIP LOCKED does not pass
      -- over its own locks); one of a priority below 0 waits for the end.
      RETURN QUERY
      WITH head AS (
        SELECT h.id FROM pgrelay._lane_head(v_ch, v_lane, v_node, v_all, v_own) h
      )
      SELECT q.id, q.origin_id, q.channel, q.lane, q.payload, q.attempt, q.enqueued_at,
             COALESCE(q.expires_at <= now(), false), ch.handler,
             (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint, ch.max_attempts
        FROM pgrelay.queue q JOIN head ON q.id = head.id
       WHERE q.not_before <= now() AND q.dispatched_at IS NULL AND q.priority >= 0
         AND q.id <> ALL (v_taken)
         FOR UPDATE OF q SKIP LOCKED;
      GET DIAGNOSTICS v_got = ROW_COUNT;
      v_n := v_n + v_got;
    END LOOP;
    ch := NULL;
  END LOOP;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_lanes_direct(text, boolean, bigint, integer, text, bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_lanes_direct(p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_after_channel text, p_after_lane bigint) TO pgrelay_processor;
