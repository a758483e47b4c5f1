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
-- does wait for update() or unregister(). These lock every row of the
-- channel FOR UPDATE (in slot order, so two of them do not deadlock) and
-- then update them, so that a producer in a REPEATABLE READ or SERIALIZABLE
-- transaction whose snapshot predates the change fails with a serialisation
-- failure instead of enqueueing under settings it no longer may see.
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

-- update: as in 0001, after taking the channel exclusively.
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
  IF c.concurrency_mode IS DISTINCT FROM old.concurrency_mode
     OR c.deduplicate IS DISTINCT FROM old.deduplicate
     OR c.node_restricted IS DISTINCT FROM old.node_restricted THEN
    UPDATE pgrelay.queue q
       SET lane = CASE c.concurrency_mode
                    WHEN 'channel' THEN 0
                    WHEN 'payload' THEN pg_catalog.hashtextextended(q.payload, 0)
                  END,
           phash = CASE WHEN c.deduplicate THEN pg_catalog.hashtextextended(q.payload, 0) END,
           run_in_node = CASE WHEN c.node_restricted THEN COALESCE(q.run_in_node, q.owner_node) END
     WHERE q.channel = p_channel AND q.dispatched_at IS NULL;
  END IF;
  -- Rows in flight keep their claim, but take the new lane too: a channel made
  -- serialised must count what is already running as its lane's in-flight row,
  -- or the next claim starts a second one beside it.
  IF c.concurrency_mode IS DISTINCT FROM old.concurrency_mode THEN
    UPDATE pgrelay.queue q
       SET lane = CASE c.concurrency_mode
                    WHEN 'channel' THEN 0
                    WHEN 'payload' THEN pg_catalog.hashtextextended(q.payload, 0)
                  END
     WHERE q.channel = p_channel AND q.dispatched_at IS NOT NULL;
  END IF;
END
$$;

-- unregister: as in 0001, after taking the channel exclusively; the
-- channel's lock rows go with it.
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
  DELETE FROM pgrelay.queue q WHERE q.channel = p_channel;
  DELETE FROM pgrelay.channels x WHERE x.channel = p_channel;
  DELETE FROM pgrelay.channel_locks l WHERE l.channel = p_channel;
END
$$;
