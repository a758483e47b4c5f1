-- 0010: integrity of the queue against concurrent changes of its channels.

-- ---------------------------------------------------------------------------
-- notify() and unregister() / update() serialise.
--
-- notify() read its channel without a lock. A producer whose transaction
-- committed after a concurrent unregister() had returned left a queue row
-- with no channel: status() said 'pending' forever, queue_stats() did not
-- show it, nothing claimed it. A producer racing update() enqueued under the
-- settings it had read: a channel just made serialised got a row with no
-- lane (run beside the lane's row in flight), one just paused got an event
-- after the pause returned.
--
-- Now every producer holds a lock on its channel until its transaction ends,
-- and unregister() and update() take the channel exclusively first: they
-- wait for the producers already in, and producers that come after wait for
-- them and then see the new state (an unknown channel, PR001; a paused one,
-- PR002; the new settings).
--
-- The lock. notify() is on the hot path of every application transaction,
-- so producers of one channel must not serialise on it, and a lock that
-- outsiders can hold would let any login stall every producer (advisory
-- locks carry no permissions). So it is a row lock on a table of pgrelay's
-- own. Not the channel's row itself: a FOR KEY SHARE lock on one row held by
-- several transactions at once makes PostgreSQL create a MultiXact for every
-- new locker. Measured on a 2-core machine, 16 connections each committing
-- one notify() per transaction on one channel: one MultiXact per notify()
-- (5 965 for 5 966 events), each with up to 16 members, which fills the
-- MultiXact member space within days at a few thousand events a second and
-- forces anti-wraparound vacuums of every table of the database.
--
-- Instead each channel has 64 lock rows (pgrelay.channel_locks). A producer
-- locks one that no other transaction holds, FOR NO KEY UPDATE SKIP LOCKED,
-- starting at its backend's own slot (pid mod 64), so concurrent producers
-- lock different rows: no MultiXact and no waiting. The row is usually the
-- one the same backend locked for its previous transaction. Only when all
-- 64 are held — by more than 64 producers of the channel at once, or by an
-- update() or unregister() — does it share its own slot FOR KEY SHARE, which
-- does not wait for another producer (a MultiXact only in that overload) and
-- does wait for update() or unregister(). update() and unregister() lock
-- every row of the channel FOR UPDATE (in slot order, so two of them do not
-- deadlock) and then update them, so that a producer in a REPEATABLE READ or
-- SERIALIZABLE transaction whose snapshot predates the change fails with a
-- serialisation failure instead of enqueueing under settings it no longer
-- may see.
--
-- Measured as above with the lock rows: no MultiXact. With commits flushed
-- to disk the rate stayed within the machine's noise (medians 279 and 269
-- transactions/s); with synchronous_commit = off the median fell from about
-- 2 500 to 2 150 notify() transactions/s (the lock costs an index probe and
-- a WAL record per transaction).
--
-- Lock rows are node-local, like the locks they carry: the table is not to
-- be replicated. A trigger that fires for replicated rows too (ENABLE
-- ALWAYS) creates them wherever a channel row appears. A channel without
-- lock rows on this node (one inserted by hand while the trigger was off)
-- still serialises: the producer then locks the channel's row FOR KEY SHARE.
--
-- Direct inserts into pgrelay.queue that leave origin_id to the trigger
-- (companion applications) take the lock in _queue_before_insert. Rows that
-- name their origin (the producer functions, which took it already, and
-- retry rows of a Processor's completion) do not.
-- ---------------------------------------------------------------------------

CREATE TABLE pgrelay.channel_locks (
  channel text NOT NULL,
  slot    int NOT NULL,
  -- Bumped by every update() and unregister(), so that a producer whose
  -- snapshot predates one fails to lock the row (see above).
  changes bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (channel, slot),
  CONSTRAINT channel_locks_slot CHECK (slot BETWEEN 0 AND 63)
);
REVOKE ALL ON pgrelay.channel_locks FROM PUBLIC;

INSERT INTO pgrelay.channel_locks (channel, slot)
SELECT c.channel, s.slot
  FROM pgrelay.channels c CROSS JOIN pg_catalog.generate_series(0, 63) AS s(slot)
ON CONFLICT DO NOTHING;

-- _channel_locks_create: a channel's lock rows, wherever its row appears
-- (register() or replication).
CREATE FUNCTION pgrelay._channel_locks_create() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  INSERT INTO pgrelay.channel_locks (channel, slot)
  SELECT NEW.channel, s.slot FROM pg_catalog.generate_series(0, 63) AS s(slot)
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END
$$;

CREATE TRIGGER channels_locks AFTER INSERT ON pgrelay.channels
  FOR EACH ROW EXECUTE FUNCTION pgrelay._channel_locks_create();
ALTER TABLE pgrelay.channels ENABLE ALWAYS TRIGGER channels_locks;

-- _lock_channel: a producer's lock on p_channel, held until its transaction
-- ends; waits only for an update() or unregister() of the channel. Says
-- nothing about whether the channel exists: the caller reads it afterwards,
-- in a statement of its own (so, under READ COMMITTED, with a snapshot taken
-- after any wait).
CREATE FUNCTION pgrelay._lock_channel(p_channel text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_start int := pg_catalog.pg_backend_pid() % 64;
BEGIN
  PERFORM FROM pgrelay.channel_locks l
   WHERE l.channel = p_channel AND l.slot >= v_start
   ORDER BY l.slot LIMIT 1
     FOR NO KEY UPDATE SKIP LOCKED;
  IF FOUND THEN
    RETURN;
  END IF;
  PERFORM FROM pgrelay.channel_locks l
   WHERE l.channel = p_channel AND l.slot < v_start
   ORDER BY l.slot LIMIT 1
     FOR NO KEY UPDATE SKIP LOCKED;
  IF FOUND THEN
    RETURN;
  END IF;
  -- Every row is held (by over 64 producers, or by an update() or
  -- unregister(), which this waits for), or the channel has none here.
  PERFORM FROM pgrelay.channel_locks l
   WHERE l.channel = p_channel AND l.slot = v_start
     FOR KEY SHARE;
  IF FOUND THEN
    RETURN;
  END IF;
  PERFORM FROM pgrelay.channels c WHERE c.channel = p_channel FOR KEY SHARE;
END
$$;

-- _lock_channel_exclusive: update()'s and unregister()'s lock on p_channel,
-- held until their transaction ends: waits for every producer holding the
-- channel, and keeps new ones waiting.
CREATE FUNCTION pgrelay._lock_channel_exclusive(p_channel text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM FROM pgrelay.channel_locks l WHERE l.channel = p_channel ORDER BY l.slot FOR UPDATE;
  UPDATE pgrelay.channel_locks l SET changes = l.changes + 1 WHERE l.channel = p_channel;
  -- A producer of a channel without lock rows locks the channel's row.
  PERFORM FROM pgrelay.channels c WHERE c.channel = p_channel FOR UPDATE;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._channel_locks_create(), pgrelay._lock_channel(text),
  pgrelay._lock_channel_exclusive(text) FROM PUBLIC;

-- _check_notify: as in 0001, after taking the producer's lock on the channel.
CREATE OR REPLACE FUNCTION pgrelay._check_notify(p_channel text) RETURNS pgrelay.channels
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels;
BEGIN
  IF p_channel IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify: channel must not be NULL' USING ERRCODE = 'PR001';
  END IF;
  PERFORM pgrelay._lock_channel(p_channel);
  SELECT * INTO ch FROM pgrelay.channels c WHERE c.channel = p_channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay.notify: unknown channel %', pg_catalog.quote_literal(p_channel)
      USING ERRCODE = 'PR001', HINT = 'Register it first with pgrelay.register().';
  END IF;
  IF ch.paused THEN
    RAISE EXCEPTION 'pgrelay.notify: channel % is paused', pg_catalog.quote_literal(p_channel)
      USING ERRCODE = 'PR002', HINT = 'Resume it with pgrelay.update(channel, p_paused := false).';
  END IF;
  RETURN ch;
END
$$;

-- _queue_before_insert: as in 0001; a row inserted without origin_id (a
-- direct insert) takes the producer's lock on its channel first. SECURITY
-- DEFINER: the lock rows are pgrelay's, not the inserting role's.
CREATE OR REPLACE FUNCTION pgrelay._queue_before_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels;
BEGIN
  IF NEW.origin_id IS NULL THEN
    PERFORM pgrelay._lock_channel(NEW.channel);
  END IF;
  SELECT * INTO ch FROM pgrelay.channels c WHERE c.channel = NEW.channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay: unknown channel %', pg_catalog.quote_literal(NEW.channel)
      USING ERRCODE = 'PR001';
  END IF;
  NEW.origin_id := COALESCE(NEW.origin_id, NEW.id);
  -- The pin is always worked out here, never taken from the caller.
  NEW.run_in_node := CASE WHEN ch.node_restricted THEN pgrelay._this_node() END;
  NEW.lane := CASE ch.concurrency_mode
                WHEN 'channel' THEN 0
                WHEN 'payload' THEN pg_catalog.hashtextextended(NEW.payload, 0)
              END;
  NEW.phash := CASE WHEN ch.deduplicate THEN pg_catalog.hashtextextended(NEW.payload, 0) END;
  IF NEW.retry_of IS NULL AND NEW.expires_at IS NULL AND ch.expire_after IS NOT NULL THEN
    NEW.expires_at := NEW.enqueued_at + ch.expire_after;
  END IF;
  RETURN NEW;
END
$$;

-- update: as in 0001, after taking the channel exclusively; rows in flight
-- are locked and retry rows re-derived (below).
CREATE OR REPLACE FUNCTION pgrelay.update(
  p_channel text,
  p_handler text DEFAULT NULL,
  p_kind text DEFAULT NULL,
  p_concurrency_mode text DEFAULT NULL,
  p_deduplicate bool DEFAULT NULL,
  p_node_restricted bool DEFAULT NULL,
  p_max_attempts int DEFAULT NULL,
  p_retry_delay interval DEFAULT NULL,
  p_expire_after interval DEFAULT NULL,
  p_timeout interval DEFAULT NULL,
  p_paused bool DEFAULT NULL,
  p_publish_payload bool DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  old pgrelay.channels;
  c pgrelay.channels;
BEGIN
  PERFORM pgrelay._lock_channel_exclusive(p_channel);
  SELECT * INTO old FROM pgrelay.channels x WHERE x.channel = p_channel FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay: unknown channel %', COALESCE(pg_catalog.quote_literal(p_channel), 'NULL')
      USING ERRCODE = 'PR001';
  END IF;
  c := old;
  c.handler := COALESCE(p_handler, old.handler);
  c.kind := COALESCE(p_kind, old.kind);
  c.concurrency_mode := COALESCE(p_concurrency_mode, old.concurrency_mode);
  c.deduplicate := COALESCE(p_deduplicate, old.deduplicate);
  c.node_restricted := COALESCE(p_node_restricted, old.node_restricted);
  c.max_attempts := COALESCE(p_max_attempts, old.max_attempts);
  c.retry_delay := COALESCE(p_retry_delay, old.retry_delay);
  c.expire_after := CASE WHEN p_expire_after IS NULL THEN old.expire_after
                         WHEN p_expire_after = interval '0' THEN NULL
                         ELSE p_expire_after END;
  c.timeout := COALESCE(p_timeout, old.timeout);
  c.paused := COALESCE(p_paused, old.paused);
  c.publish_payload := COALESCE(p_publish_payload, old.publish_payload);
  -- The handler is re-checked only when it or the kind changes: pausing a
  -- channel whose handler's function was dropped must still work.
  PERFORM pgrelay._check_channel(c, c.handler IS DISTINCT FROM old.handler OR c.kind IS DISTINCT FROM old.kind);
  UPDATE pgrelay.channels x
     SET handler = c.handler, kind = c.kind, concurrency_mode = c.concurrency_mode,
         deduplicate = c.deduplicate, node_restricted = c.node_restricted,
         max_attempts = c.max_attempts, retry_delay = c.retry_delay,
         expire_after = c.expire_after, timeout = c.timeout, paused = c.paused,
         publish_payload = c.publish_payload, updated_at = now()
   WHERE x.channel = p_channel;
  -- Rows not yet dispatched follow the new settings.
  --
  -- Rows in flight keep their claim, but take the new lane too: a channel
  -- made serialised must count what is already running as its lane's
  -- in-flight row, or the next claim starts a second one beside it. They are
  -- updated whenever a derived setting changes, so that each is locked until
  -- this transaction ends: a completion that comes meanwhile waits, and its
  -- retry row is then derived from the new settings.
  --
  -- A completion that already held a row makes these statements wait, and
  -- the retry row it commits is not in their snapshot: re-derive until a new
  -- snapshot sees no row with the old values. (Producers are held off by the
  -- channel lock; a retry only comes from a row that was visible.)
  IF c.concurrency_mode IS DISTINCT FROM old.concurrency_mode
     OR c.deduplicate IS DISTINCT FROM old.deduplicate
     OR c.node_restricted IS DISTINCT FROM old.node_restricted THEN
    LOOP
      UPDATE pgrelay.queue q
         SET lane = CASE c.concurrency_mode
                      WHEN 'channel' THEN 0
                      WHEN 'payload' THEN pg_catalog.hashtextextended(q.payload, 0)
                    END,
             phash = CASE WHEN c.deduplicate THEN pg_catalog.hashtextextended(q.payload, 0) END,
             run_in_node = CASE WHEN c.node_restricted THEN COALESCE(q.run_in_node, q.owner_node) END
       WHERE q.channel = p_channel AND q.dispatched_at IS NULL;
      UPDATE pgrelay.queue q
         SET lane = CASE c.concurrency_mode
                      WHEN 'channel' THEN 0
                      WHEN 'payload' THEN pg_catalog.hashtextextended(q.payload, 0)
                    END
       WHERE q.channel = p_channel AND q.dispatched_at IS NOT NULL;
      EXIT WHEN NOT EXISTS (
        SELECT FROM pgrelay.queue q
         WHERE q.channel = p_channel
           AND (q.lane IS DISTINCT FROM CASE c.concurrency_mode
                                          WHEN 'channel' THEN 0
                                          WHEN 'payload' THEN pg_catalog.hashtextextended(q.payload, 0)
                                        END
                OR (q.dispatched_at IS NULL
                    AND (q.phash IS DISTINCT FROM CASE WHEN c.deduplicate
                                                       THEN pg_catalog.hashtextextended(q.payload, 0) END
                         OR (q.run_in_node IS NULL) = c.node_restricted))));
    END LOOP;
  END IF;
END
$$;

-- unregister: as in 0001, after taking the channel exclusively; the
-- channel's lock rows go with it, and a forced one also removes the retry
-- rows that completions it waited for scheduled meanwhile.
CREATE OR REPLACE FUNCTION pgrelay.unregister(p_channel text, p_force bool DEFAULT false) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n bigint;
BEGIN
  PERFORM pgrelay._lock_channel_exclusive(p_channel);
  PERFORM FROM pgrelay.channels x WHERE x.channel = p_channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay: unknown channel %', COALESCE(pg_catalog.quote_literal(p_channel), 'NULL')
      USING ERRCODE = 'PR001';
  END IF;
  SELECT count(*) INTO n FROM pgrelay.queue q WHERE q.channel = p_channel;
  IF n > 0 AND NOT COALESCE(p_force, false) THEN
    RAISE EXCEPTION 'pgrelay: channel % still has % pending or in-flight events', p_channel, n
      USING ERRCODE = 'PR004', HINT = 'Wait for them, or pass p_force := true to discard them.';
  END IF;
  -- A completion that holds a row of the channel makes the DELETE wait, and
  -- the retry row it commits is not in the DELETE's snapshot: delete again
  -- until a new snapshot sees no row. (Producers are held off by the lock;
  -- a retry only comes from a row that was visible, so this ends.)
  LOOP
    DELETE FROM pgrelay.queue q WHERE q.channel = p_channel;
    EXIT WHEN NOT EXISTS (SELECT FROM pgrelay.queue q WHERE q.channel = p_channel);
  END LOOP;
  DELETE FROM pgrelay.channels x WHERE x.channel = p_channel;
  DELETE FROM pgrelay.channel_locks l WHERE l.channel = p_channel;
END
$$;

-- ---------------------------------------------------------------------------
-- An absorbed notify() is always followed by a run that starts after its
-- transaction committed.
--
-- A deduplicated notify() adds nothing to the queue: the pending row with
-- the same payload stands for it, and must run after the notifying
-- transaction commits, or the handler misses that transaction's change. The
-- deduplicating insert locks the row it absorbs into, and a claim must not
-- take a row so locked. Direct and lane batches and the classic claim of
-- 'none' channels lock the rows they take FOR UPDATE SKIP LOCKED, so they
-- pass such a row over. The classic claim of 'channel' and 'payload' lanes
-- (email, nats, and sql without direct batches) took a lane's head with a
-- plain UPDATE, which a FOR KEY SHARE lock does not stop: the run could start
-- before the absorbed transaction committed. Now:
--
-- * _claim locks a lane's head FOR UPDATE SKIP LOCKED before taking it; a
--   head that a producer holds leaves the lane for a later claim (never its
--   second row).
-- * _enqueue_dedup locks the row it absorbs into FOR SHARE SKIP LOCKED, not
--   FOR KEY SHARE. Both are skipped by the claims' FOR UPDATE and skip a row
--   a claim holds, so a row being claimed absorbs nothing (the notify gets a
--   row of its own). But a FOR KEY SHARE lock is granted on a row that a
--   claim updated and committed after the producer's snapshot, without
--   reading it again: the producer could absorb into a row already claimed.
--   FOR SHARE conflicts with that update, so the row is read again (READ
--   COMMITTED: no longer pending, not absorbed) or the producer fails with a
--   serialisation failure (REPEATABLE READ).
-- ---------------------------------------------------------------------------

-- _enqueue_dedup: as in 0007, with the lock above.
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
     FOR SHARE OF q SKIP LOCKED;
  IF FOUND THEN
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, node)
    VALUES (v_row.id, pgrelay._next_id(), ch.channel, v_row.attempt, 'deduplicated', v_node);
    RETURN v_row.origin_id;
  END IF;
  v_id := pgrelay._next_id();
  INSERT INTO pgrelay.queue (id, origin_id, channel, payload, run_in_node, lane, phash, expires_at)
  VALUES (v_id, v_id, ch.channel, p_payload,
          CASE WHEN ch.node_restricted THEN v_node END,
          CASE ch.concurrency_mode WHEN 'channel' THEN 0 WHEN 'payload' THEN v_hash END,
          v_hash,
          now() + ch.expire_after);
  IF ch.publish_payload AND pg_catalog.current_setting('session_replication_role') = 'replica' THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload) VALUES (v_id, p_payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  RETURN v_id;
END
$$;

-- _claim: as in 0005, with a lane's head locked before it is taken.
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
        CONTINUE WHEN NOT pg_catalog.pg_try_advisory_xact_lock(1886816819,
          pg_catalog.hashtext(ch.channel) # pg_catalog.hashint8(v_lane));
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

-- ---------------------------------------------------------------------------
-- register() of an identical definition is a no-op.
--
-- A deployment script that registers its channels runs on every node of a
-- cluster (pg_auto_mv registers the same node-restricted channel on each);
-- on the second node the channel's row has already arrived by replication,
-- and register() failed with PR003. Now a channel that exists with the same
-- definition — every parameter of register() equal to the stored value;
-- intervals compare as PostgreSQL compares them, so '60 minutes' equals
-- '1 hour' — is left as it is (not resumed if paused, no timestamp moved).
-- A different definition still fails with PR003, and the message names each
-- field that differs with the registered and the given value.
--
-- Concurrent register() calls of one name serialise on the primary key
-- (INSERT ... ON CONFLICT waits for an uncommitted insert of the name), not
-- on an advisory lock any login could hold.
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pgrelay.register(
  p_channel text,
  p_handler text,
  p_kind text DEFAULT 'sql',
  p_concurrency_mode text DEFAULT 'none',
  p_deduplicate bool DEFAULT false,
  p_node_restricted bool DEFAULT false,
  p_max_attempts int DEFAULT 5,
  p_retry_delay interval DEFAULT '1 second',
  p_expire_after interval DEFAULT NULL,
  p_timeout interval DEFAULT '30 seconds',
  p_publish_payload bool DEFAULT false
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  c pgrelay.channels;
  old pgrelay.channels;
  v_diff text[] := '{}';
BEGIN
  c.channel := p_channel;
  c.handler := p_handler;
  c.kind := p_kind;
  c.concurrency_mode := p_concurrency_mode;
  c.deduplicate := COALESCE(p_deduplicate, false);
  c.node_restricted := COALESCE(p_node_restricted, false);
  c.max_attempts := p_max_attempts;
  c.retry_delay := p_retry_delay;
  c.expire_after := p_expire_after;
  c.timeout := p_timeout;
  c.publish_payload := COALESCE(p_publish_payload, false);
  PERFORM pgrelay._check_channel(c);
  LOOP
    INSERT INTO pgrelay.channels (channel, handler, kind, concurrency_mode, deduplicate,
                                  node_restricted, max_attempts, retry_delay, expire_after, timeout,
                                  publish_payload)
    VALUES (c.channel, c.handler, c.kind, c.concurrency_mode, c.deduplicate,
            c.node_restricted, c.max_attempts, c.retry_delay, c.expire_after, c.timeout,
            c.publish_payload)
    ON CONFLICT (channel) DO NOTHING;
    IF FOUND THEN
      RETURN;
    END IF;
    SELECT * INTO old FROM pgrelay.channels x WHERE x.channel = p_channel;
    EXIT WHEN FOUND;
    -- Unregistered between the two statements: insert again.
  END LOOP;
  IF old.handler IS DISTINCT FROM c.handler THEN
    v_diff := v_diff || pg_catalog.format('handler (%s registered, %s given)',
      pg_catalog.quote_literal(old.handler), pg_catalog.quote_literal(c.handler));
  END IF;
  IF old.kind IS DISTINCT FROM c.kind THEN
    v_diff := v_diff || pg_catalog.format('kind (%s registered, %s given)', old.kind, c.kind);
  END IF;
  IF old.concurrency_mode IS DISTINCT FROM c.concurrency_mode THEN
    v_diff := v_diff || pg_catalog.format('concurrency_mode (%s registered, %s given)',
      old.concurrency_mode, c.concurrency_mode);
  END IF;
  IF old.deduplicate IS DISTINCT FROM c.deduplicate THEN
    v_diff := v_diff || pg_catalog.format('deduplicate (%s registered, %s given)', old.deduplicate, c.deduplicate);
  END IF;
  IF old.node_restricted IS DISTINCT FROM c.node_restricted THEN
    v_diff := v_diff || pg_catalog.format('node_restricted (%s registered, %s given)',
      old.node_restricted, c.node_restricted);
  END IF;
  IF old.max_attempts IS DISTINCT FROM c.max_attempts THEN
    v_diff := v_diff || pg_catalog.format('max_attempts (%s registered, %s given)', old.max_attempts, c.max_attempts);
  END IF;
  IF old.retry_delay IS DISTINCT FROM c.retry_delay THEN
    v_diff := v_diff || pg_catalog.format('retry_delay (%s registered, %s given)', old.retry_delay, c.retry_delay);
  END IF;
  IF old.expire_after IS DISTINCT FROM c.expire_after THEN
    v_diff := v_diff || pg_catalog.format('expire_after (%s registered, %s given)',
      COALESCE(old.expire_after::text, 'NULL'), COALESCE(c.expire_after::text, 'NULL'));
  END IF;
  IF old.timeout IS DISTINCT FROM c.timeout THEN
    v_diff := v_diff || pg_catalog.format('timeout (%s registered, %s given)', old.timeout, c.timeout);
  END IF;
  IF old.publish_payload IS DISTINCT FROM c.publish_payload THEN
    v_diff := v_diff || pg_catalog.format('publish_payload (%s registered, %s given)',
      old.publish_payload, c.publish_payload);
  END IF;
  IF pg_catalog.cardinality(v_diff) > 0 THEN
    RAISE EXCEPTION 'pgrelay: channel % already exists with a different definition: %',
      pg_catalog.quote_literal(p_channel), pg_catalog.array_to_string(v_diff, ', ')
      USING ERRCODE = 'PR003',
            HINT = 'Use pgrelay.update() to change it; registering an identical definition again is a no-op.';
  END IF;
END
$$;
