-- 0005: the hot path under load.
--
-- _next_id_at: the counter is moved forward to the clock by one session at a
-- time, as before, but the others no longer queue for that session's lock
-- one after another. Under load every session that draws an id while the
-- counter lags would wait on the exclusive lock in turn, each handing it on
-- only when it is scheduled again (on a busy 2-core machine, tens of
-- milliseconds per convoy). Now one session takes the lock without waiting
-- (pg_try_advisory_lock) and moves the counter; the others wait for it with a
-- shared lock, which releases all of them at once, and draw again. Should the
-- counter still lag (the mover read an older clock), they fall back to the
-- exclusive lock as before. Uniqueness still rests on nextval alone and on
-- setval never running in two sessions at once.
CREATE OR REPLACE FUNCTION pgrelay._next_id_at(p_ms bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v bigint := pg_catalog.nextval('pgrelay._id_seq');
  t bigint := p_ms << 12;
  v_lock text;
BEGIN
  IF v < t - 409600 THEN
    BEGIN
      IF pg_catalog.pg_try_advisory_lock(1886816817, 1) THEN
        v_lock := 'exclusive';
      ELSE
        v_lock := 'shared';
        PERFORM pg_catalog.pg_advisory_lock_shared(1886816817, 1);
        PERFORM pg_catalog.pg_advisory_unlock_shared(1886816817, 1);
        v_lock := NULL;
        v := pg_catalog.nextval('pgrelay._id_seq');
        IF v < t - 409600 THEN
          v_lock := 'exclusive';
          PERFORM pg_catalog.pg_advisory_lock(1886816817, 1);
        END IF;
      END IF;
      IF v_lock = 'exclusive' THEN
        v := pg_catalog.nextval('pgrelay._id_seq');
        IF v < t - 409600 THEN
          PERFORM pg_catalog.setval('pgrelay._id_seq', t, true);
          v := t;
        END IF;
        PERFORM pg_catalog.pg_advisory_unlock(1886816817, 1);
        v_lock := NULL;
      END IF;
    EXCEPTION WHEN OTHERS OR QUERY_CANCELED THEN
      -- A cancel may land while a lock is awaited (not held): unlocking then
      -- only warns.
      IF v_lock = 'exclusive' THEN
        PERFORM pg_catalog.pg_advisory_unlock(1886816817, 1);
      ELSIF v_lock = 'shared' THEN
        PERFORM pg_catalog.pg_advisory_unlock_shared(1886816817, 1);
      END IF;
      RAISE;
    END;
  END IF;
  RETURN ((v >> 12) << 22) | (pgrelay._this_node()::bigint << 12) | (v & 4095);
END
$$;

-- ---------------------------------------------------------------------------
-- Direct batches of 'none' sql channels.
--
-- A Processor runs the events of a 'none' sql channel in batches, each batch
-- in one transaction that claims its rows by locking them (FOR UPDATE SKIP
-- LOCKED), runs every handler under its own savepoint and completes the
-- events: no claim is written, the row locks are the claim. A Processor that
-- dies mid-batch leaves nothing to rescue: its transaction rolls back and the
-- rows are pending again, with no attempt counted. One commit covers the
-- batch, where a claim, a handler transaction and a completion each cost one
-- before.
-- ---------------------------------------------------------------------------

-- _claim_direct: locks up to p_limit ready rows of the 'none' sql channel
-- p_channel for the caller's transaction, oldest first, and returns them with
-- the channel's settings. Nothing when the channel is paused, gone, or no
-- longer a 'none' sql channel. p_mode, p_leader and p_term as for _claim: in
-- leader mode a leader naming a term it no longer holds gets pinned rows only.
CREATE FUNCTION pgrelay._claim_direct(p_channel text, p_mode text, p_leader bool, p_term bigint, p_limit int)
RETURNS TABLE (id bigint, origin_id bigint, payload text, attempt int, enqueued_at timestamptz,
               expired bool, handler text, timeout_ms bigint, max_attempts int)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool := p_mode = 'single' OR (p_mode = 'leader' AND COALESCE(p_leader, false));
  ch pgrelay.channels;
BEGIN
  IF p_mode IS NULL OR p_mode NOT IN ('single', 'multi-node', 'leader') THEN
    RAISE EXCEPTION 'pgrelay: unknown mode %', COALESCE(pg_catalog.quote_literal(p_mode), 'NULL') USING ERRCODE = 'PR021';
  END IF;
  SELECT * INTO ch FROM pgrelay.channels c
   WHERE c.channel = p_channel AND c.kind = 'sql' AND c.concurrency_mode = 'none' AND NOT c.paused;
  IF NOT FOUND OR p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  IF v_all AND p_mode = 'leader' AND p_term IS NOT NULL THEN
    v_all := EXISTS (SELECT FROM pgrelay.nodes l
                      WHERE l.node_id = -1 AND l.leader_node = v_node AND l.term = p_term
                        AND l.lease_until > now());
  END IF;
  RETURN QUERY
  SELECT q.id, q.origin_id, q.payload, q.attempt, q.enqueued_at, COALESCE(q.expires_at <= now(), false),
         ch.handler, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint, ch.max_attempts
    FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.not_before <= now()
     AND (q.run_in_node = v_node
          OR (q.run_in_node IS NULL AND (v_all OR (p_mode = 'multi-node' AND q.owner_node = v_node))))
   ORDER BY q.not_before, q.id
   LIMIT p_limit
     FOR UPDATE OF q SKIP LOCKED;
END
$$;

-- _ready_direct: the 'none' sql channels with a row ready for this node,
-- for the Processor to start their batches, and '' when a serialised sql
-- channel ('channel' or 'payload') has a lane with a row ready (a lane
-- batch, _claim_lanes_direct, takes those of all such channels).
CREATE FUNCTION pgrelay._ready_direct(p_mode text, p_leader bool)
RETURNS SETOF text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool := p_mode = 'single' OR (p_mode = 'leader' AND COALESCE(p_leader, false));
BEGIN
  -- A lateral LIMIT 1 in queue_ready's order per channel: the planner would
  -- otherwise answer the EXISTS with a hash of the whole queue.
  RETURN QUERY
  SELECT c.channel FROM pgrelay.channels c
   CROSS JOIN LATERAL (
     SELECT 1 FROM pgrelay.queue q
      WHERE q.channel = c.channel AND q.dispatched_at IS NULL AND q.not_before <= now()
        AND (q.run_in_node = v_node
             OR (q.run_in_node IS NULL AND (v_all OR (p_mode = 'multi-node' AND q.owner_node = v_node))))
      ORDER BY q.not_before, q.id
      LIMIT 1) r
   WHERE c.kind = 'sql' AND c.concurrency_mode = 'none' AND NOT c.paused;
  -- Any ready lane row will do: a hint, checked by the lane batch itself.
  RETURN QUERY
  SELECT ''::text FROM pgrelay.queue q
   WHERE q.dispatched_at IS NULL AND q.lane IS NOT NULL AND q.not_before <= now()
     AND (q.run_in_node = v_node
          OR (q.run_in_node IS NULL AND (v_all OR (p_mode = 'multi-node' AND q.owner_node = v_node))))
     AND EXISTS (SELECT FROM pgrelay.channels c
                  WHERE c.channel = q.channel AND c.kind = 'sql' AND NOT c.paused
                    AND c.concurrency_mode IN ('channel', 'payload'))
   LIMIT 1;
END
$$;

-- _claim_lanes_direct: a lane batch. Takes the heads of up to p_limit lanes
-- of the serialised sql channels ('channel': one lane per channel; 'payload':
-- one per payload) for the caller's transaction, one row per lane, walking
-- the lanes in (channel, lane) order from just after (p_after_channel,
-- p_after_lane) and wrapping around (NULL: from the start). Each lane is
-- held by its transaction-scoped advisory lock, the one _claim takes for a
-- lane, so no other batch or claim serves it until the transaction ends;
-- its head row is locked too. A lane whose head is not ready (a retry in its
-- backoff), whose event is in flight under a claim, or whose head another
-- transaction holds is passed over, never its second row. Node rules and
-- leader fencing as for _claim_direct. Returns each row with its channel's
-- settings and its lane, so the caller can go on from the last one.
CREATE FUNCTION pgrelay._claim_lanes_direct(p_mode text, p_leader bool, p_term bigint, p_limit int,
                                            p_after_channel text, p_after_lane bigint)
RETURNS TABLE (id bigint, origin_id bigint, channel text, lane bigint, payload text, attempt int,
               enqueued_at timestamptz, expired bool, handler text, timeout_ms bigint, max_attempts int)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_bitmapscan = off
AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool := p_mode = 'single' OR (p_mode = 'leader' AND COALESCE(p_leader, false));
  v_own bool := p_mode = 'multi-node';
  v_ch text := p_after_channel;
  v_lane bigint := p_after_lane;
  v_wrapped bool := p_after_channel IS NULL;
  v_n int := 0;
  v_got int;
  v_steps int := 0;
  r record;
  ch pgrelay.channels;
BEGIN
  IF p_mode IS NULL OR p_mode NOT IN ('single', 'multi-node', 'leader') THEN
    RAISE EXCEPTION 'pgrelay: unknown mode %', COALESCE(pg_catalog.quote_literal(p_mode), 'NULL') USING ERRCODE = 'PR021';
  END IF;
  IF p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  IF v_all AND p_mode = 'leader' AND p_term IS NOT NULL THEN
    v_all := EXISTS (SELECT FROM pgrelay.nodes l
                      WHERE l.node_id = -1 AND l.leader_node = v_node AND l.term = p_term
                        AND l.lease_until > now());
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
               OR ch.concurrency_mode NOT IN ('channel', 'payload');
    CONTINUE WHEN NOT pg_catalog.pg_try_advisory_xact_lock(1886816819,
      pg_catalog.hashtext(v_ch) # pg_catalog.hashint8(v_lane));
    RETURN QUERY
    WITH head AS (
      SELECT q.id
        FROM pgrelay.queue q
       WHERE q.channel = v_ch AND q.lane = v_lane AND q.dispatched_at IS NULL
         AND (q.run_in_node = v_node
              OR (q.run_in_node IS NULL AND (v_all OR (v_own AND q.owner_node = v_node))))
         AND NOT EXISTS (
           SELECT FROM pgrelay.queue f
            WHERE f.channel = v_ch AND f.lane = v_lane AND f.dispatched_at IS NOT NULL
              AND (f.run_in_node = v_node
                   OR (f.run_in_node IS NULL AND (v_all OR (v_own AND f.owner_node = v_node)))))
       ORDER BY q.origin_id, q.id
       LIMIT 1
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

-- _next_ids: p_n ids of _next_id's kind in one call, for a batch of log rows:
-- the first from _next_id (which moves the counter up to the clock when it
-- lags), the others straight from the counter right after it, so they lag
-- the clock no more than the first. One call per batch instead of one per row.
CREATE FUNCTION pgrelay._next_ids(p_n int) RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node bigint := pgrelay._this_node();
BEGIN
  IF p_n IS NULL OR p_n <= 0 THEN
    RETURN '{}';
  END IF;
  RETURN ARRAY[pgrelay._next_id()] || ARRAY(
    SELECT ((v >> 12) << 22) | (v_node << 12) | (v & 4095)
      FROM (SELECT pg_catalog.nextval('pgrelay._id_seq') AS v FROM pg_catalog.generate_series(2, p_n) g
             ORDER BY g) s);
END
$$;

-- _complete: as before, and with p_processor NULL it completes the rows a
-- direct batch holds locked in the caller's transaction (unclaimed rows;
-- p_claimed_at is ignored).
CREATE OR REPLACE FUNCTION pgrelay._complete(p_processor bigint, p_ids bigint[], p_claimed_at timestamptz[],
                                  p_events text[], p_errors text[])
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_released int;
  v_done int;
BEGIN
  WITH o AS (
    SELECT * FROM unnest(p_ids, p_claimed_at, p_events) AS o(id, claimed_at, event)
     WHERE o.event = 'release'
  ), rel AS (
    UPDATE pgrelay.queue q
       SET dispatched_at = NULL, dispatched_by = NULL
      FROM o
     WHERE q.id = o.id AND q.dispatched_by = p_processor AND q.dispatched_at = o.claimed_at
    RETURNING q.id
  )
  SELECT count(*) INTO v_released FROM rel;

  WITH o AS (
    SELECT * FROM unnest(p_ids, p_claimed_at, p_events, p_errors)
             AS o(id, claimed_at, event, error)
     WHERE o.event <> 'release'
  ), del AS (
    DELETE FROM pgrelay.queue q
     USING o
     WHERE q.id = o.id
       AND CASE WHEN p_processor IS NULL THEN q.dispatched_at IS NULL
                ELSE q.dispatched_by = p_processor AND q.dispatched_at = o.claimed_at END
    RETURNING q.*, o.event AS o_event, o.error AS o_error
  ), d AS (
    SELECT del.*, c.retry_delay,
           CASE WHEN del.o_event = 'failed' AND del.attempt >= COALESCE(c.max_attempts, 0)
                THEN 'gave_up' ELSE del.o_event END AS final
      FROM del LEFT JOIN pgrelay.channels c ON c.channel = del.channel
  ), ids AS (
    SELECT pgrelay._next_ids((SELECT count(*) FROM d)::int) AS a
  ), lg AS (
    INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, error, node)
    SELECT ids.a[x.rn], x.id, x.origin_id, x.channel, x.attempt, x.final,
           CASE WHEN x.o_error IS NULL THEN NULL ELSE pg_catalog.left(x.o_error, 8000) END, v_node
      FROM (SELECT d.*, pg_catalog.row_number() OVER (ORDER BY d.id) AS rn FROM d) x, ids
     ORDER BY x.id
    RETURNING 1
  ), rt AS (
    INSERT INTO pgrelay.queue (origin_id, channel, payload, attempt, retry_of, enqueued_at,
                               not_before, expires_at)
    SELECT d.origin_id, d.channel, d.payload, d.attempt + 1, d.id, d.enqueued_at,
           now() + pgrelay._backoff(d.retry_delay, d.attempt), d.expires_at
      FROM d
     WHERE d.final = 'failed' AND d.retry_delay IS NOT NULL
     ORDER BY d.id
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM lg) INTO v_done;

  RETURN v_released + v_done;
END
$$;

-- _claim gains p_direct: with it true, the sql channels are left to direct
-- batches. (Callers that do not name it claim as before.)
DROP FUNCTION pgrelay._claim(bigint, text, bool, int, text[], bigint);
CREATE FUNCTION pgrelay._claim(p_processor bigint, p_mode text, p_leader bool, p_limit int,
                               p_kinds text[] DEFAULT '{sql}', p_term bigint DEFAULT NULL,
                               p_direct bool DEFAULT false)
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
  v_all bool := p_mode = 'single' OR (p_mode = 'leader' AND COALESCE(p_leader, false));
  v_own bool := p_mode = 'multi-node';
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
  IF p_mode IS NULL OR p_mode NOT IN ('single', 'multi-node', 'leader') THEN
    RAISE EXCEPTION 'pgrelay: unknown mode %', COALESCE(pg_catalog.quote_literal(p_mode), 'NULL') USING ERRCODE = 'PR021';
  END IF;
  IF p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  -- Fencing: a leader that names its term claims unrestricted rows only while
  -- the lease row still says it holds that term.
  IF v_all AND p_mode = 'leader' AND p_term IS NOT NULL THEN
    v_all := EXISTS (SELECT FROM pgrelay.nodes l
                      WHERE l.node_id = -1 AND l.leader_node = v_node AND l.term = p_term
                        AND l.lease_until > now());
  END IF;
  SELECT count(*) INTO v_nch FROM pgrelay.channels c WHERE NOT c.paused AND c.kind = ANY (p_kinds)
     AND NOT (p_direct AND c.kind = 'sql');
  IF v_nch = 0 THEN
    RETURN;
  END IF;
  v_share := GREATEST(1, (p_limit + v_nch - 1) / v_nch);

  FOR v_pass IN 1..2 LOOP
    FOR ch IN
      SELECT * FROM pgrelay.channels c
       WHERE NOT c.paused AND c.kind = ANY (p_kinds) AND (v_pass = 1 OR c.channel = ANY (v_full))
         AND NOT (p_direct AND c.kind = 'sql')
       ORDER BY pg_catalog.random()
    LOOP
      EXIT WHEN v_left <= 0;
      IF ch.concurrency_mode = 'none' THEN
        RETURN QUERY
        WITH cand AS (
          SELECT q.id
            FROM pgrelay.queue q
           WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.not_before <= now()
             AND (q.run_in_node = v_node
                  OR (q.run_in_node IS NULL AND (v_all OR (v_own AND q.owner_node = v_node))))
           ORDER BY q.not_before, q.id
           LIMIT CASE WHEN v_pass = 1 THEN LEAST(v_share, v_left) ELSE v_left END
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
        CONTINUE WHEN NOT pg_catalog.pg_try_advisory_xact_lock(1886816819,
          pg_catalog.hashtext(ch.channel) # pg_catalog.hashint8(v_lane));
        RETURN QUERY
        WITH head AS (
          SELECT q.id, q.not_before
            FROM pgrelay.queue q
           WHERE q.channel = ch.channel AND q.lane = v_lane AND q.dispatched_at IS NULL
             AND (q.run_in_node = v_node
                  OR (q.run_in_node IS NULL AND (v_all OR (v_own AND q.owner_node = v_node))))
             AND NOT EXISTS (
               SELECT FROM pgrelay.queue f
                WHERE f.channel = ch.channel AND f.lane = v_lane AND f.dispatched_at IS NOT NULL
                  AND (f.run_in_node = v_node
                       OR (f.run_in_node IS NULL AND (v_all OR (v_own AND f.owner_node = v_node)))))
           ORDER BY q.origin_id, q.id
           LIMIT 1
        ), upd AS (
          UPDATE pgrelay.queue q
             SET dispatched_at = now(), dispatched_by = p_processor
            FROM head
           WHERE q.id = head.id AND head.not_before <= now() AND q.dispatched_at IS NULL
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

-- _batch_fence: sent just before a batch records its outcomes. In leader
-- mode a batch of a leader (p_term set) commits only while the lease row
-- still says this node holds that term, read at this moment (not at the
-- transaction's start): a batch writes no claim that would replicate, so a
-- leader that lost its lease during a long batch must not commit it beside
-- the new leader's runs. Raises PR031 otherwise; the batch then rolls back
-- whole, its events pending again. Nothing to check in other modes or for a
-- node that is not the leader (its batches take pinned rows only).
CREATE FUNCTION pgrelay._batch_fence(p_mode text, p_term bigint) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF p_mode = 'leader' AND p_term IS NOT NULL AND NOT EXISTS (
       SELECT FROM pgrelay.nodes l
        WHERE l.node_id = -1 AND l.leader_node = pgrelay._this_node() AND l.term = p_term
          AND l.lease_until > pg_catalog.clock_timestamp()) THEN
    RAISE EXCEPTION 'pgrelay: the leader lease of term % ended while the batch ran', p_term
      USING ERRCODE = 'PR031';
  END IF;
END
$$;

-- (Functions are executable by PUBLIC when created; a schema's default
-- privileges cannot take that away.)
REVOKE ALL ON FUNCTION
  pgrelay._next_ids(int),
  pgrelay._claim(bigint, text, bool, int, text[], bigint, bool),
  pgrelay._claim_direct(text, text, bool, bigint, int),
  pgrelay._claim_lanes_direct(text, bool, bigint, int, text, bigint),
  pgrelay._batch_fence(text, bigint),
  pgrelay._ready_direct(text, bool)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  pgrelay._next_ids(int),
  pgrelay._claim(bigint, text, bool, int, text[], bigint, bool),
  pgrelay._claim_direct(text, text, bool, bigint, int),
  pgrelay._claim_lanes_direct(text, bool, bigint, int, text, bigint),
  pgrelay._batch_fence(text, bigint),
  pgrelay._ready_direct(text, bool)
  TO pgrelay_processor;

-- notify_many: as before, with the new rows' ids drawn in one _next_ids call
-- instead of one _next_id call per row.
CREATE OR REPLACE FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[]) RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  p text;
  v_ids bigint[];
BEGIN
  IF p_payloads IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify_many: payloads must not be NULL' USING ERRCODE = 'PR005';
  END IF;
  FOREACH p IN ARRAY p_payloads LOOP
    PERFORM pgrelay._check_payload(p_channel, p);
  END LOOP;
  IF ch.deduplicate THEN
    FOREACH p IN ARRAY p_payloads LOOP
      RETURN NEXT pgrelay._enqueue_dedup(ch, p);
    END LOOP;
    RETURN;
  END IF;
  v_ids := pgrelay._next_ids(COALESCE(pg_catalog.cardinality(p_payloads), 0));
  RETURN QUERY
  WITH ins AS (
    INSERT INTO pgrelay.queue (id, channel, payload, run_in_node)
    SELECT v_ids[u.n], p_channel, u.payload, CASE WHEN ch.node_restricted THEN pgrelay._this_node() END
      FROM pg_catalog.unnest(p_payloads) WITH ORDINALITY AS u(payload, n)
     ORDER BY u.n
    RETURNING id
  )
  SELECT ins.id FROM ins ORDER BY ins.id;
END
$$;

-- _enqueue_dedup: as before, except that a row a direct batch holds locked
-- (it may be running its handler right now) is no longer pending: a new
-- notify of its payload gets a row of its own. The match takes a key-share
-- lock without waiting, so a locked row is skipped; the lock, held until the
-- notifying transaction ends, lets a classic claim's UPDATE through and keeps
-- a batch off the row until then.
CREATE OR REPLACE FUNCTION pgrelay._enqueue_dedup(ch pgrelay.channels, p_payload text) RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_hash bigint := pg_catalog.hashtextextended(p_payload, 0);
  v_row record;
  v_id bigint;
BEGIN
  -- Two producers notifying the same payload at once: the second waits for the
  -- first to commit, then sees its row.
  PERFORM pg_catalog.pg_advisory_xact_lock(1886816818,
    pg_catalog.hashtext(ch.channel) # pg_catalog.hashint8(v_hash));
  SELECT q.id, q.origin_id, q.attempt INTO v_row
    FROM pgrelay.queue q
   WHERE q.channel = ch.channel AND q.phash = v_hash AND q.dispatched_at IS NULL
     AND q.payload = p_payload
     AND (NOT ch.node_restricted OR q.run_in_node = v_node)
   ORDER BY q.origin_id
   LIMIT 1
     FOR KEY SHARE SKIP LOCKED;
  IF FOUND THEN
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, node)
    VALUES (v_row.id, pgrelay._next_id(), ch.channel, v_row.attempt, 'deduplicated', v_node);
    RETURN v_row.origin_id;
  END IF;
  INSERT INTO pgrelay.queue (channel, payload, run_in_node)
  VALUES (ch.channel, p_payload, CASE WHEN ch.node_restricted THEN v_node END)
  RETURNING id INTO v_id;
  RETURN v_id;
END
$$;

-- _lock_claims locked a batch's claims for the batches of claimed sql events
-- that direct and lane batches replace; nothing calls it any more.
DROP FUNCTION pgrelay._lock_claims(bigint, bigint[], timestamptz[]);
