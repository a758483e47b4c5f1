-- _claim_lanes_direct: the heads of the ready lanes of the serialised sql
-- channels, one event per lane, for a lane batch; a channel with flow
-- limits is _claim's, not a batch's. Priority orders the lanes by their
-- heads, as the classic
-- claim orders a 'payload' channel's (_claim): first the lanes whose head
-- has a priority above 0, highest first (then oldest); then the walk over
-- the lanes from p_after_channel/p_after_lane, passing over the heads of a
-- priority below 0; then, while there is room, those, highest first. A
-- lane stays FIFO: its head is taken or nothing. The first and last steps
-- serve only the channels that have rows of a priority other than 0, read
-- from queue_priority first (one probe per such channel, and one more), so
-- a queue without priorities costs a single probe before the walk.

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
  v_lane bigint := COALESCE(p_after_lane, -9223372036854775808);
  v_n int := 0;
  v_got int;
  v_taken bigint[] := '{}';
  v_prio text[];
  v_sign int;
  v_lo smallint;
  v_hi smallint;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  IF p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  -- The channels with rows of a priority other than 0: a loose index scan
  -- over queue_priority, one probe per channel found.
  v_prio := ARRAY(
    WITH RECURSIVE pc(channel) AS (
      (SELECT q.channel FROM pgrelay.queue q
        WHERE q.dispatched_at IS NULL AND q.priority <> 0
        ORDER BY q.channel LIMIT 1)
      UNION ALL
      SELECT (SELECT q.channel FROM pgrelay.queue q
               WHERE q.dispatched_at IS NULL AND q.priority <> 0 AND q.channel > pc.channel
               ORDER BY q.channel LIMIT 1)
        FROM pc WHERE pc.channel IS NOT NULL)
    SELECT pc.channel FROM pc WHERE pc.channel IS NOT NULL);

  FOREACH v_sign IN ARRAY ARRAY[1, 0, -1] LOOP
    EXIT WHEN v_n >= p_limit;
    IF v_sign <> 0 THEN
      CONTINUE WHEN pg_catalog.cardinality(v_prio) = 0;
      v_lo := CASE WHEN v_sign > 0 THEN 1 ELSE -32768 END;
      v_hi := CASE WHEN v_sign > 0 THEN 32767 ELSE -1 END;
      -- The heads of a priority above (below) 0: the lanes holding the
      -- channels' rows of that sign, a bounded number, and their heads of
      -- that sign in priority order. Each is locked, ready, or passed over.
      -- One statement: each head is a LATERAL subquery with its own LIMIT
      -- and lock, taken in priority order.
      FOR id, origin_id, channel, lane, payload, attempt, enqueued_at, expired, handler, timeout_ms, max_attempts IN
        SELECT h.*
          FROM (SELECT y.id, c.handler, c.timeout, c.max_attempts
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
                 CROSS JOIN LATERAL (
                   SELECT y.id, y.priority, y.origin_id FROM pgrelay.queue y
                    WHERE y.id = hd.id AND y.priority BETWEEN v_lo AND v_hi AND y.id <> ALL (v_taken)
                    LIMIT 1) y
                 WHERE c.channel = ANY (v_prio) AND c.kind = 'sql' AND NOT c.paused
                   AND c.concurrency_mode IN ('channel', 'payload')
                   AND c.max_in_flight IS NULL AND c.rate_limit IS NULL
                 ORDER BY y.priority DESC, c.priority DESC, y.origin_id, y.id) hp
         CROSS JOIN LATERAL (
           SELECT q.id, q.origin_id, q.channel, q.lane, q.payload, q.attempt, q.enqueued_at,
                  COALESCE(q.expires_at <= now(), false), hp.handler,
                  (EXTRACT(epoch FROM hp.timeout) * 1000)::bigint, hp.max_attempts
             FROM pgrelay.queue q
            WHERE q.id = hp.id AND (q.not_before <= now()) IS TRUE AND q.dispatched_at IS NULL
            LIMIT 1
              FOR UPDATE OF q SKIP LOCKED) h
         LIMIT p_limit - v_n
      LOOP
        v_n := v_n + 1;
        v_taken := v_taken || id;
        RETURN NEXT;
      END LOOP;
      CONTINUE;
    END IF;

    -- The walk: one statement, a loose index scan over queue_lane (one
    -- probe per lane, however long the lanes are) that goes on from the
    -- start once it passes the last lane, up to where it began. w's first
    -- row is where the walk stands, not a lane (OFFSET 1). Bounded, so a
    -- queue full of lanes this batch cannot serve costs a bounded claim.
    -- Each lane's head is a LATERAL subquery with its own LIMIT and lock, so
    -- the plan takes the lanes in the walk's order and locks only a head it
    -- returns. Its row is read by the id alone: the ready test is written
    -- (...) IS TRUE, a filter and never an index condition, so no plan (one
    -- cached on a small queue included) reads queue_ready for each lane. A head taken above is this transaction's (SKIP LOCKED does not pass
    -- over its own locks); one of a priority below 0 waits for the end.
    RETURN QUERY
    WITH RECURSIVE w(channel, lane, wrapped) AS (
      SELECT p_after_channel, v_lane, false
      UNION ALL
      SELECT n.channel, n.lane, n.wrapped
        FROM w CROSS JOIN LATERAL (
          (SELECT q.channel, q.lane, w.wrapped FROM pgrelay.queue q
            WHERE q.dispatched_at IS NULL AND q.lane IS NOT NULL AND (q.channel, q.lane) > (w.channel, w.lane)
            ORDER BY q.channel, q.lane LIMIT 1)
          UNION ALL
          (SELECT q.channel, q.lane, true FROM pgrelay.queue q
            WHERE q.dispatched_at IS NULL AND q.lane IS NOT NULL AND NOT w.wrapped
            ORDER BY q.channel, q.lane LIMIT 1)
          LIMIT 1) n
       WHERE NOT (n.wrapped AND p_after_channel IS NOT NULL AND (n.channel, n.lane) > (p_after_channel, v_lane))
    )
    SELECT h.*
      FROM (SELECT w.channel, w.lane FROM w OFFSET 1 LIMIT 4 * p_limit + 64) l
     CROSS JOIN LATERAL pgrelay._lane_head(l.channel, l.lane, v_node, v_all, v_own) hd
     CROSS JOIN LATERAL (
       SELECT q.id, q.origin_id, q.channel, q.lane, q.payload, q.attempt, q.enqueued_at,
              COALESCE(q.expires_at <= now(), false), c.handler,
              (EXTRACT(epoch FROM c.timeout) * 1000)::bigint, c.max_attempts
         FROM pgrelay.channels c, pgrelay.queue q
        WHERE c.channel = l.channel AND c.kind = 'sql' AND NOT c.paused
          AND c.concurrency_mode IN ('channel', 'payload')
          AND c.max_in_flight IS NULL AND c.rate_limit IS NULL
          AND q.id = hd.id AND (q.not_before <= now()) IS TRUE AND q.dispatched_at IS NULL
          AND q.priority >= 0 AND q.id <> ALL (v_taken)
        LIMIT 1
          FOR UPDATE OF q SKIP LOCKED) h
     LIMIT p_limit - v_n;
    GET DIAGNOSTICS v_got = ROW_COUNT;
    v_n := v_n + v_got;
  END LOOP;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_lanes_direct(text, boolean, bigint, integer, text, bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_lanes_direct(p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_after_channel text, p_after_lane bigint) TO pgrelay_processor;
