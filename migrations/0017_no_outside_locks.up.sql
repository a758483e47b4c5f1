-- 0017: no lock of pgrelay's that a login outside its roles can hold, wake-ups
-- that name no channel, and a node id that producers cannot forge.
--
-- Advisory locks carry no permissions: any login that can connect could hold
-- the keys pgrelay used and stall every producer (the id generator's), a
-- serialised channel (its lanes', computable from the channel's name), a
-- deduplicated payload, or a node's NATS publishing. Every mutual exclusion
-- is now a lock on a row or table of pgrelay's own, which only pgrelay's
-- roles can lock (FOR ... UPDATE needs the UPDATE privilege):
--
-- * The id generator moves its counter to the clock under a lock of the
--   node's row of pgrelay.this_node, taken in a subtransaction that is then
--   rolled back: the row lock ends with it, setval (not transactional) stays.
--   So it is held for the few statements of the move, never to the end of a
--   producer's transaction, and only by a session inside _next_id_at.
-- * Deduplication: producers of one payload meet on one of 4096 rows of
--   pgrelay.dedup_locks (the payload's hash), held to the end of their
--   transaction as the advisory lock was.
-- * Serialised lanes: a claim takes a lane's head row itself, FOR UPDATE SKIP
--   LOCKED, and never a lane's second row (0010); a head that another
--   transaction holds, has in flight or has deleted is passed over. That
--   already keeps a lane to one event at a time, so the lane lock goes.
-- * The publisher's lease and the migration lock are taken from Go (the
--   table pgrelay.publish_leases; LOCK TABLE pgrelay.schema_migrations).
--
-- Wake-ups named their channel (NOTIFY pgrelay, 'channel'), and anyone may
-- LISTEN. They now carry md5(wake_key || channel), wake_key a random value
-- of this node's row that only pgrelay's roles read: a Processor knows which
-- of its batchers to start, a listener outside learns only that something
-- was enqueued.
--
-- The node id. Producers could SET pg_relay.node_id in their session before
-- notify(): events pinned to a node that never runs them, ids carrying
-- another node's number. pgrelay.this_node holds the node's id as the DBA
-- configured it: written here from the migrating session, and again by every
-- Processor as it starts (pgrelay._record_node(), from its own setting or
-- --node-id). _this_node() returns it to every session, except that a
-- session of a login in pgrelay_processor or pgrelay_admin (superusers
-- included) keeps its own pg_relay.node_id: a Processor's --node-id and an
-- admin's session stay as they were. A session whose setting equals the
-- recorded id (the common case: the database's setting) costs one read of a
-- one-row table.
--
-- pgrelay.this_node, pgrelay.dedup_locks and pgrelay.publish_leases belong
-- to their node and are never replicated (migrations.NodeLocalTables).
-- ---------------------------------------------------------------------------

-- _node_setting: the session's pg_relay.node_id, 0 when unset (the rules of
-- _this_node before this migration).
CREATE FUNCTION pgrelay._node_setting() RETURNS int
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  s text := pg_catalog.current_setting('pg_relay.node_id', true);
  n bigint;
BEGIN
  IF s IS NULL OR pg_catalog.btrim(s) = '' THEN
    RETURN 0;
  END IF;
  IF s !~ '^\s*[0-9]{1,9}\s*$' THEN
    RAISE EXCEPTION 'pgrelay: pg_relay.node_id = % is not an integer between 0 and 1023', pg_catalog.quote_literal(s)
      USING ERRCODE = 'PR020';
  END IF;
  n := pg_catalog.btrim(s)::bigint;
  IF n > 1023 THEN
    RAISE EXCEPTION 'pgrelay: pg_relay.node_id = % is outside 0..1023', n USING ERRCODE = 'PR020';
  END IF;
  RETURN n::int;
END
$$;

CREATE TABLE pgrelay.this_node (
  singleton  bool PRIMARY KEY DEFAULT true,
  node_id    int NOT NULL,
  wake_key   text NOT NULL DEFAULT pg_catalog.md5(pg_catalog.gen_random_uuid()::text),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT this_node_singleton CHECK (singleton),
  CONSTRAINT this_node_node CHECK (node_id BETWEEN 0 AND 1023)
);
REVOKE ALL ON pgrelay.this_node FROM PUBLIC;
INSERT INTO pgrelay.this_node (node_id) VALUES (pgrelay._node_setting());

CREATE TABLE pgrelay.dedup_locks (
  slot int PRIMARY KEY,
  CONSTRAINT dedup_locks_slot CHECK (slot BETWEEN 0 AND 4095)
);
REVOKE ALL ON pgrelay.dedup_locks FROM PUBLIC;
INSERT INTO pgrelay.dedup_locks (slot) SELECT s FROM pg_catalog.generate_series(0, 4095) AS s;

-- One row per node whose NATS publisher is running: the session that holds
-- the lease (its pid and start time; a session that ended holds nothing).
CREATE TABLE pgrelay.publish_leases (
  node_id      int PRIMARY KEY,
  holder_pid   int NOT NULL,
  holder_start timestamptz NOT NULL,
  taken_at     timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT publish_leases_node CHECK (node_id BETWEEN 0 AND 1023)
);
REVOKE ALL ON pgrelay.publish_leases FROM PUBLIC;

-- _this_node: this node's id for the caller (see above).
CREATE OR REPLACE FUNCTION pgrelay._this_node() RETURNS int
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  s text := pg_catalog.current_setting('pg_relay.node_id', true);
  v_node int;
BEGIN
  SELECT t.node_id INTO v_node FROM pgrelay.this_node t;
  IF v_node IS NULL THEN
    RETURN pgrelay._node_setting();
  END IF;
  IF s = v_node::text OR (v_node = 0 AND pg_catalog.btrim(COALESCE(s, '')) = '') THEN
    RETURN v_node;
  END IF;
  IF pg_catalog.pg_has_role(session_user, 'pgrelay_processor', 'MEMBER')
     OR pg_catalog.pg_has_role(session_user, 'pgrelay_admin', 'MEMBER') THEN
    RETURN pgrelay._node_setting();
  END IF;
  RETURN v_node;
END
$$;

-- _record_node: records the caller's node id (its pg_relay.node_id) as this
-- node's; returns the id recorded before. Run by every Processor as it
-- starts and by `pgrelay migrate`.
CREATE FUNCTION pgrelay._record_node() RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_new int := pgrelay._node_setting();
  v_old int;
BEGIN
  SELECT t.node_id INTO v_old FROM pgrelay.this_node t;
  IF v_old IS DISTINCT FROM v_new THEN
    INSERT INTO pgrelay.this_node AS t (node_id) VALUES (v_new)
    ON CONFLICT (singleton) DO UPDATE SET node_id = excluded.node_id, updated_at = now();
  END IF;
  RETURN COALESCE(v_old, v_new);
END
$$;

-- _next_id_at: as in 0005, with the counter's move under a row lock of
-- pgrelay.this_node instead of an advisory lock. One session takes the row
-- without waiting (SKIP LOCKED) and moves the counter; the others wait for it
-- with FOR KEY SHARE, which conflicts only with the mover's FOR UPDATE and so
-- releases all of them at once, and draw again. Should the counter still lag,
-- they take the row as movers in turn. Every lock is taken in a
-- subtransaction rolled back at once (PR099 never leaves this function).
CREATE OR REPLACE FUNCTION pgrelay._next_id_at(p_ms bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v bigint := pg_catalog.nextval('pgrelay._id_seq');
  t bigint := p_ms << 12;
  v_moved bool := false;
BEGIN
  IF v < t - 409600 THEN
    BEGIN
      PERFORM FROM pgrelay.this_node n FOR UPDATE SKIP LOCKED;
      IF FOUND THEN
        v := pg_catalog.nextval('pgrelay._id_seq');
        IF v < t - 409600 THEN
          PERFORM pg_catalog.setval('pgrelay._id_seq', t, true);
          v := t;
        END IF;
        v_moved := true;
      ELSE
        PERFORM FROM pgrelay.this_node n FOR KEY SHARE;
      END IF;
      RAISE EXCEPTION USING ERRCODE = 'PR099';
    EXCEPTION WHEN SQLSTATE 'PR099' THEN
      NULL;
    END;
    IF NOT v_moved THEN
      v := pg_catalog.nextval('pgrelay._id_seq');
      IF v < t - 409600 THEN
        BEGIN
          PERFORM FROM pgrelay.this_node n FOR UPDATE;
          v := pg_catalog.nextval('pgrelay._id_seq');
          IF v < t - 409600 THEN
            PERFORM pg_catalog.setval('pgrelay._id_seq', t, true);
            v := t;
          END IF;
          RAISE EXCEPTION USING ERRCODE = 'PR099';
        EXCEPTION WHEN SQLSTATE 'PR099' THEN
          NULL;
        END;
      END IF;
    END IF;
  END IF;
  RETURN ((v >> 12) << 22) | (pgrelay._this_node()::bigint << 12) | (v & 4095);
END
$$;

-- _queue_wake: as in 0006, the payload a digest of the channel's name.
CREATE OR REPLACE FUNCTION pgrelay._queue_wake() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_first text;
  v_last text;
  v_hint text;
BEGIN
  SELECT min(n.channel), max(n.channel) INTO v_first, v_last FROM new_rows n;
  IF v_first IS NOT NULL THEN
    IF v_first = v_last THEN
      SELECT pg_catalog.md5(t.wake_key || v_first) INTO v_hint FROM pgrelay.this_node t;
    END IF;
    PERFORM pg_catalog.pg_notify('pgrelay', COALESCE(v_hint, ''));
  END IF;
  RETURN NULL;
END
$$;

-- _claim and _claim_lanes_direct: as in 0010 and 0005, without the lane's
-- advisory lock (see above).

CREATE OR REPLACE FUNCTION pgrelay._claim(p_processor bigint, p_mode text, p_leader bool, p_limit int,
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
        RETURN QUERY
        WITH head AS (
          SELECT q.id
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

CREATE OR REPLACE FUNCTION pgrelay._claim_lanes_direct(p_mode text, p_leader bool, p_term bigint, p_limit int,
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
-- _enqueue_dedup: as in 0013, the payload's producers meeting on a row of
-- pgrelay.dedup_locks.
CREATE OR REPLACE FUNCTION pgrelay._enqueue_dedup(ch pgrelay.channels, p_payload text, p_due timestamptz)
RETURNS bigint
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
  -- first to commit, then sees its row. They meet on the payload's slot row.
  PERFORM FROM pgrelay.dedup_locks d
   WHERE d.slot = (pg_catalog.hashtext(ch.channel) # pg_catalog.hashint8(v_hash)) & 4095
     FOR NO KEY UPDATE;
  SELECT q.id, q.origin_id, q.attempt INTO v_row
    FROM pgrelay.queue q
   WHERE q.channel = ch.channel AND q.phash = v_hash AND q.dispatched_at IS NULL
     AND q.payload = p_payload
     AND (NOT ch.node_restricted OR q.run_in_node = v_node)
     AND CASE WHEN p_due IS NULL
              -- Due now: an immediate row, a retry, or a delayed row whose time has come.
              THEN q.retry_of IS NOT NULL OR q.not_before <= GREATEST(q.enqueued_at, now())
              -- Delayed: a delayed row due at the same time.
              ELSE q.retry_of IS NULL AND q.not_before = p_due
         END
   ORDER BY q.origin_id
   LIMIT 1
     FOR SHARE OF q SKIP LOCKED;
  IF FOUND THEN
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, node)
    VALUES (v_row.id, pgrelay._next_id(), ch.channel, v_row.attempt, 'deduplicated', v_node);
    RETURN v_row.origin_id;
  END IF;
  v_id := pgrelay._next_id();
  INSERT INTO pgrelay.queue (id, origin_id, channel, payload, run_in_node, lane, phash, not_before, expires_at)
  VALUES (v_id, v_id, ch.channel, p_payload,
          CASE WHEN ch.node_restricted THEN v_node END,
          CASE ch.concurrency_mode WHEN 'channel' THEN 0 WHEN 'payload' THEN v_hash END,
          v_hash,
          COALESCE(p_due, now()),
          COALESCE(p_due, now()) + ch.expire_after);
  IF ch.publish_payload AND pg_catalog.current_setting('session_replication_role') = 'replica' THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload) VALUES (v_id, p_payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  RETURN v_id;
END
$$;
-- ---------------------------------------------------------------------------
-- Privileges
-- ---------------------------------------------------------------------------
-- Processors read the node's row (ids, wake-ups of retry rows) and lock it
-- when they move the id counter (FOR UPDATE needs an UPDATE privilege: only
-- on updated_at, which nothing changes through it); they hold their node's
-- publisher lease. The notifier's role draws ids too. Producers and admins
-- read the node id.
GRANT SELECT (node_id, wake_key), UPDATE (updated_at) ON pgrelay.this_node TO pgrelay_processor;
GRANT SELECT (node_id), UPDATE (updated_at) ON pgrelay.this_node TO pgrelay_notifier;
GRANT SELECT (node_id) ON pgrelay.this_node TO pgrelay_producer, pgrelay_admin;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgrelay.publish_leases TO pgrelay_processor;
GRANT SELECT ON pgrelay.publish_leases TO pgrelay_admin;
REVOKE ALL ON FUNCTION pgrelay._node_setting(), pgrelay._record_node() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._node_setting() TO pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_notifier;
GRANT EXECUTE ON FUNCTION pgrelay._record_node() TO pgrelay_processor, pgrelay_admin;
