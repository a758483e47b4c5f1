-- _claim: a Processor's claim over every channel it serves that has rows
-- pending (_pending_channels). Channels are visited in the order of their priority (at random among equals, which
-- keeps a fair share), each taking its share of p_limit within its own
-- limits; a 'payload' channel's lane heads are taken in the order of their
-- priority, a serialised lane in FIFO order. Planned once per session, as
-- _complete_outcomes is (TestClaimPlannedOnce): a custom plan at every call
-- doubled the claim's time; TestExplainClaimPlans checks the generic plans.
--
-- Last, a row with a NULL id for each rate-limited channel visited whose
-- window its claims fill while it has rows left: its channel (kind, handler,
-- concurrency_mode) and rate_wait_ms, the milliseconds until the window has
-- room (_claim_rate_rows). Nothing else would claim those rows before the
-- poll: the Processor claims again then. rate_wait_ms is NULL on every
-- claimed row.

CREATE OR REPLACE FUNCTION pgrelay._claim(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_kinds text[] DEFAULT '{sql}'::text[], p_term bigint DEFAULT NULL::bigint, p_direct boolean DEFAULT false, p_direct_kinds text[] DEFAULT '{}'::text[]) RETURNS TABLE(id bigint, origin_id bigint, channel text, payload text, attempt integer, enqueued_at timestamp with time zone, dispatched_at timestamp with time zone, expired boolean, kind text, handler text, concurrency_mode text, timeout_ms bigint, max_attempts integer, rate_wait_ms bigint)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool;
  v_own bool;
  v_left int := p_limit;
  v_nch int;
  v_share int;
  v_n int;
  v_cap int;
  v_pending text[];
  v_full text[] := '{}';
  v_rated text[] := '{}';
  v_pass int;
  v_start bigint;
  v_lanes bigint[];
  v_first bigint[];
  v_limited bool;
  ch pgrelay.channels;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  IF p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  v_pending := pgrelay._pending_channels();
  SELECT count(*) INTO v_nch FROM pgrelay.channels c
   WHERE c.channel = ANY (v_pending) AND pgrelay._claim_visits(c, p_kinds, p_direct, p_direct_kinds);
  IF v_nch = 0 THEN
    RETURN;
  END IF;
  v_share := GREATEST(1, (p_limit + v_nch - 1) / v_nch);

  FOR v_pass IN 1..2 LOOP
    FOR ch IN
      SELECT * FROM pgrelay.channels c
       WHERE c.channel = ANY (v_pending) AND pgrelay._claim_visits(c, p_kinds, p_direct, p_direct_kinds)
         AND (v_pass = 1 OR c.channel = ANY (v_full))
       ORDER BY c.priority DESC, pg_catalog.random()
    LOOP
      EXIT WHEN v_left <= 0;
      IF ch.rate_limit IS NOT NULL AND v_pass = 1 THEN
        v_rated := v_rated || ch.channel;
      END IF;
      IF ch.concurrency_mode = 'none' THEN
        RETURN QUERY
        SELECT n.*, NULL::bigint
          FROM pgrelay._claim_none(p_processor, ch, v_node, v_all, v_own,
                                   CASE WHEN v_pass = 1 THEN LEAST(v_share, v_left) ELSE v_left END) n;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_left := v_left - v_n;
        IF v_pass = 1 AND v_n >= v_share THEN
          v_full := v_full || ch.channel;
        END IF;
        CONTINUE;
      END IF;

      -- Serialised channels: one lane ('channel') or many ('payload').
      CONTINUE WHEN v_pass = 2;
      v_limited := ch.max_in_flight IS NOT NULL OR ch.rate_limit IS NOT NULL;
      v_cap := LEAST(v_share, v_left);
      IF v_limited THEN
        v_cap := pgrelay._claim_allowance(ch, v_node, v_all, v_own, v_cap);
        CONTINUE WHEN v_cap <= 0;
      END IF;
      v_first := '{}';
      IF ch.concurrency_mode = 'channel' THEN
        v_lanes := ARRAY[0::bigint];
      ELSE
        IF pgrelay._claim_prioritised(ch.channel) THEN
          -- The lanes holding the rows of the highest priorities first: their
          -- heads (which may be of another priority) are ordered below.
          SELECT COALESCE(pg_catalog.array_agg(DISTINCT x.lane), '{}') INTO v_first
            FROM (SELECT q.lane FROM pgrelay.queue q
                   WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.priority > 0
                   ORDER BY q.priority DESC, q.not_before, q.id
                   LIMIT 2 * v_share + 8) x
           WHERE x.lane IS NOT NULL;
        END IF;
        -- A loose index scan over the distinct lanes with pending rows, from a
        -- random starting point, wrapping around, visiting a bounded number.
        v_start := ((pg_catalog.random() - 0.5) * 18000000000000000000.0)::numeric::bigint;
        WITH RECURSIVE l(lane) AS (
          (SELECT q.lane FROM pgrelay.queue q
            WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.lane IS NOT NULL
              AND q.lane >= v_start
            ORDER BY q.lane LIMIT 1)
          UNION ALL
          SELECT (SELECT q.lane FROM pgrelay.queue q
                   WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.lane IS NOT NULL
                     AND q.lane > l.lane
                   ORDER BY q.lane LIMIT 1)
            FROM l WHERE l.lane IS NOT NULL
        )
        SELECT pg_catalog.array_agg(x.lane) INTO v_lanes
          FROM (SELECT l.lane FROM l WHERE l.lane IS NOT NULL LIMIT 2 * v_share + 8) x;
        IF COALESCE(pg_catalog.cardinality(v_lanes), 0) < 2 * v_share + 8 THEN
          WITH RECURSIVE l(lane) AS (
            (SELECT q.lane FROM pgrelay.queue q
              WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.lane IS NOT NULL
              ORDER BY q.lane LIMIT 1)
            UNION ALL
            SELECT (SELECT q.lane FROM pgrelay.queue q
                     WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.lane IS NOT NULL
                       AND q.lane > l.lane AND q.lane < v_start
                     ORDER BY q.lane LIMIT 1)
              FROM l WHERE l.lane IS NOT NULL
          )
          SELECT COALESCE(v_lanes, '{}') || COALESCE(pg_catalog.array_agg(x.lane), '{}') INTO v_lanes
            FROM (SELECT l.lane FROM l WHERE l.lane IS NOT NULL AND l.lane < v_start
                   LIMIT 2 * v_share + 8 - COALESCE(pg_catalog.cardinality(v_lanes), 0)) x;
        END IF;
        IF pg_catalog.cardinality(v_first) > 0 THEN
          -- Priority chooses among the lanes' heads; each lane stays FIFO.
          SELECT pg_catalog.array_agg(y.lane ORDER BY y.priority DESC, y.origin_id, y.id) INTO v_lanes
            FROM pg_catalog.unnest((SELECT pg_catalog.array_agg(DISTINCT u.lane)
                                      FROM pg_catalog.unnest(v_first || COALESCE(v_lanes, '{}')) u(lane))) l(lane)
            CROSS JOIN LATERAL pgrelay._lane_head(ch.channel, l.lane, v_node, v_all, v_own) h
            CROSS JOIN LATERAL (
              SELECT l.lane, q.priority, q.origin_id, q.id FROM pgrelay.queue q
               WHERE q.id = h.id LIMIT 1) y;
        END IF;
      END IF;

      -- The lanes' heads in the order of v_lanes, in one statement: each
      -- head is a LATERAL subquery with its own LIMIT and lock, so the plan
      -- takes the lanes in order and locks only a head it claims, read by its
      -- id alone ((...) IS TRUE is a filter, never an index condition, as in
      -- _claim_lanes_direct). The head
      -- itself, never the next row: a head a producer holds (it absorbed a
      -- notify) leaves the lane for the next claim.
      RETURN QUERY
      WITH locked AS (
        SELECT h.id, l.ord
          FROM pg_catalog.unnest(COALESCE(v_lanes, '{}')) WITH ORDINALITY l(lane, ord)
         CROSS JOIN LATERAL pgrelay._lane_head(ch.channel, l.lane, v_node, v_all, v_own) hd
         CROSS JOIN LATERAL (
           SELECT q.id FROM pgrelay.queue q
            WHERE q.id = hd.id AND (q.not_before <= now()) IS TRUE AND q.dispatched_at IS NULL
            LIMIT 1
              FOR UPDATE OF q SKIP LOCKED) h
         LIMIT v_cap
      ), upd AS (
        UPDATE pgrelay.queue q
           SET dispatched_at = now(), dispatched_by = p_processor
          FROM locked
         WHERE q.id = locked.id
        RETURNING q.*, locked.ord AS ord
      )
      SELECT u.id, u.origin_id, u.channel, u.payload, u.attempt, u.enqueued_at,
             u.dispatched_at, COALESCE(u.expires_at <= now(), false), ch.kind, ch.handler,
             ch.concurrency_mode, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint,
             ch.max_attempts, NULL::bigint
        FROM upd u
       ORDER BY u.ord;
      GET DIAGNOSTICS v_n = ROW_COUNT;
      IF ch.rate_limit IS NOT NULL THEN
        PERFORM pgrelay._claim_started(ch.channel, v_n);
      END IF;
      v_left := v_left - v_n;
    END LOOP;
    EXIT WHEN v_left <= 0 OR pg_catalog.cardinality(v_full) = 0;
  END LOOP;
  IF pg_catalog.cardinality(v_rated) > 0 THEN
    RETURN QUERY SELECT * FROM pgrelay._claim_rate_rows(v_rated, v_node, v_all, v_own);
  END IF;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim(bigint, text, boolean, integer, text[], bigint, boolean, text[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_kinds text[], p_term bigint, p_direct boolean, p_direct_kinds text[]) TO pgrelay_processor;
