-- Claims of one channel. A notification names the channel a producer
-- enqueued into (its wakeHint); when the Processor claims that channel's
-- events (a 'none' channel that runs no direct batches: a Go Handle
-- handler's, an email or NATS channel's), it claims that channel alone at
-- once (_claim_channel), a statement of a fraction of _claim's cost, and the
-- full claim follows when the wake-up slots are armed again. The claim of a
-- 'none' channel (_claim_none) and which channels _claim visits
-- (_claim_visits) are each written once, for both.

-- _claim_visits: whether _claim visits channel c: not paused, its
-- _claim_kind among p_kinds, and not left to direct batches (every sql
-- channel with p_direct; the 'none' channels of p_direct_kinds). Inlined
-- (an SQL standard body bound at creation, no SET clause), as _claim_kind.
CREATE FUNCTION pgrelay._claim_visits(c pgrelay.channels, p_kinds text[], p_direct bool,
                                      p_direct_kinds text[]) RETURNS bool
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN NOT c.paused AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_kinds)
   AND NOT (p_direct AND c.kind = 'sql')
   AND NOT COALESCE(c.concurrency_mode = 'none' AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_direct_kinds), false);

-- _claim_none: claims up to p_limit ready rows of ch, a 'none' channel, for
-- processor p_processor (p_node, p_all and p_own: _claim_scope's), oldest
-- first.
CREATE FUNCTION pgrelay._claim_none(p_processor bigint, ch pgrelay.channels, p_node int, p_all bool,
                                    p_own bool, p_limit int)
RETURNS TABLE (id bigint, origin_id bigint, channel text, payload text, attempt int,
               enqueued_at timestamptz, dispatched_at timestamptz, expired bool,
               kind text, handler text, concurrency_mode text, timeout_ms bigint,
               max_attempts int)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH cand AS (
    SELECT q.id
      FROM pgrelay.queue q
     WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.not_before <= now()
       AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
     ORDER BY q.not_before, q.id
     LIMIT p_limit
     FOR UPDATE SKIP LOCKED
  ), upd AS (
    -- By primary key whatever the plan: a join with cand in a generic plan
    -- (which guesses LIMIT at a tenth of the channel) hashes a scan of the
    -- whole queue.
    UPDATE pgrelay.queue q
       SET dispatched_at = now(), dispatched_by = p_processor
     WHERE q.id = ANY (ARRAY(SELECT cand.id FROM cand))
    RETURNING q.*
  )
  SELECT u.id, u.origin_id, u.channel, u.payload, u.attempt, u.enqueued_at,
         u.dispatched_at, COALESCE(u.expires_at <= now(), false), ch.kind, ch.handler,
         ch.concurrency_mode, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint,
         ch.max_attempts
    FROM upd u
   ORDER BY u.not_before, u.id;
END
$$;

-- _claim: as in 0001, but the channels visited are those _claim_visits
-- accepts: those whose _claim_kind is in p_kinds (a Processor passes its
-- kinds, 'sql', 'email', 'nats', and 'go:<name>' for each Go handler it has),
-- less those left to direct batches (p_direct: every sql channel; the 'none'
-- channels of p_direct_kinds, the Go handlers the Processor runs in direct
-- batches); a 'none' channel's rows are claimed by _claim_none. The queue
-- queries are unchanged.
-- (A database migrated while 0009 still held this function has the new
-- signature already, and not the old one: hence IF EXISTS and OR REPLACE.)
DROP FUNCTION IF EXISTS pgrelay._claim(bigint, text, bool, int, text[], bigint, bool);
CREATE OR REPLACE FUNCTION pgrelay._claim(p_processor bigint, p_mode text, p_leader bool, p_limit int,
                               p_kinds text[] DEFAULT '{sql}', p_term bigint DEFAULT NULL,
                               p_direct bool DEFAULT false, p_direct_kinds text[] DEFAULT '{}')
RETURNS TABLE (id bigint, origin_id bigint, channel text, payload text, attempt int,
               enqueued_at timestamptz, dispatched_at timestamptz, expired bool,
               kind text, handler text, concurrency_mode text, timeout_ms bigint,
               max_attempts int)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- PL/pgSQL reuses a generic plan once it looks no dearer than the custom ones.
-- For the lane head query a generic plan guesses a lane of a row or two (the
-- average over many 'payload' lanes) and may fetch the lane by bitmap and sort
-- it; for a 'channel' lane, which is the whole channel's backlog, that reads
-- every pending row of the channel on every claim. Without bitmap scans the
-- only plans left read queue_lane in order and stop at the head.
SET enable_bitmapscan = off
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
  v_got int;
  v_full text[] := '{}';
  v_pass int;
  v_start bigint;
  v_lanes bigint[];
  v_lane bigint;
  ch pgrelay.channels;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  IF p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  SELECT count(*) INTO v_nch FROM pgrelay.channels c
   WHERE pgrelay._claim_visits(c, p_kinds, p_direct, p_direct_kinds);
  IF v_nch = 0 THEN
    RETURN;
  END IF;
  v_share := GREATEST(1, (p_limit + v_nch - 1) / v_nch);

  FOR v_pass IN 1..2 LOOP
    FOR ch IN
      SELECT * FROM pgrelay.channels c
       WHERE pgrelay._claim_visits(c, p_kinds, p_direct, p_direct_kinds)
         AND (v_pass = 1 OR c.channel = ANY (v_full))
       ORDER BY pg_catalog.random()
    LOOP
      EXIT WHEN v_left <= 0;
      IF ch.concurrency_mode = 'none' THEN
        RETURN QUERY
        SELECT * FROM pgrelay._claim_none(p_processor, ch, v_node, v_all, v_own,
                                          CASE WHEN v_pass = 1 THEN LEAST(v_share, v_left) ELSE v_left END);
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_left := v_left - v_n;
        IF v_pass = 1 AND v_n >= v_share THEN
          v_full := v_full || ch.channel;
        END IF;
        CONTINUE;
      END IF;

      -- Serialised channels: one lane ('channel') or many ('payload').
      CONTINUE WHEN v_pass = 2;
      IF ch.concurrency_mode = 'channel' THEN
        v_lanes := ARRAY[0::bigint];
      ELSE
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
      END IF;

      v_n := 0;
      FOREACH v_lane IN ARRAY COALESCE(v_lanes, '{}') LOOP
        -- v_left is only brought down after the loop: bound by both here, or
        -- a serialised channel visited last takes a full share of what is left.
        EXIT WHEN v_n >= LEAST(v_share, v_left);
        RETURN QUERY
        WITH head AS (
          SELECT h.id FROM pgrelay._lane_head(ch.channel, v_lane, v_node, v_all, v_own) h
        ), locked AS (
          -- The head itself, never the next row: a head a producer holds
          -- (it absorbed a notify) leaves the lane for the next claim.
          SELECT q.id
            FROM pgrelay.queue q JOIN head ON q.id = head.id
           WHERE q.not_before <= now() AND q.dispatched_at IS NULL
             FOR UPDATE OF q SKIP LOCKED
        ), upd AS (
          UPDATE pgrelay.queue q
             SET dispatched_at = now(), dispatched_by = p_processor
            FROM locked
           WHERE q.id = locked.id
          RETURNING q.*
        )
        SELECT u.id, u.origin_id, u.channel, u.payload, u.attempt, u.enqueued_at,
               u.dispatched_at, COALESCE(u.expires_at <= now(), false), ch.kind, ch.handler,
               ch.concurrency_mode, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint,
               ch.max_attempts
          FROM upd u;
        GET DIAGNOSTICS v_got = ROW_COUNT;
        v_n := v_n + v_got;
      END LOOP;
      v_left := v_left - v_n;
    END LOOP;
    EXIT WHEN v_left <= 0 OR pg_catalog.cardinality(v_full) = 0;
  END LOOP;
END
$$;


-- _claim_channel: _claim for p_channel alone, when _claim visits it and it is
-- a 'none' channel (serialised channels need _claim's lanes); nothing
-- otherwise.
CREATE FUNCTION pgrelay._claim_channel(p_processor bigint, p_mode text, p_leader bool, p_limit int,
                                       p_channel text, p_kinds text[], p_term bigint DEFAULT NULL,
                                       p_direct bool DEFAULT false, p_direct_kinds text[] DEFAULT '{}')
RETURNS TABLE (id bigint, origin_id bigint, channel text, payload text, attempt int,
               enqueued_at timestamptz, dispatched_at timestamptz, expired bool,
               kind text, handler text, concurrency_mode text, timeout_ms bigint,
               max_attempts int)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_all bool;
  v_own bool;
  ch pgrelay.channels;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  SELECT * INTO ch FROM pgrelay.channels c
   WHERE c.channel = p_channel AND c.concurrency_mode = 'none'
     AND pgrelay._claim_visits(c, p_kinds, p_direct, p_direct_kinds);
  IF NOT FOUND OR p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT * FROM pgrelay._claim_none(p_processor, ch, pgrelay._this_node(), v_all, v_own, p_limit);
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_visits(pgrelay.channels, text[], bool, text[]),
  pgrelay._claim_none(bigint, pgrelay.channels, int, bool, bool, int),
  pgrelay._claim(bigint, text, bool, int, text[], bigint, bool, text[]),
  pgrelay._claim_channel(bigint, text, bool, int, text, text[], bigint, bool, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._claim_visits(pgrelay.channels, text[], bool, text[]),
  pgrelay._claim_none(bigint, pgrelay.channels, int, bool, bool, int),
  pgrelay._claim(bigint, text, bool, int, text[], bigint, bool, text[]),
  pgrelay._claim_channel(bigint, text, bool, int, text, text[], bigint, bool, text[])
  TO pgrelay_processor;
