-- pgrelay's schema as of release v0.1.0: the queue, its channels, the log, the
-- nodes and Processors, the id generator, the producer API (notify,
-- notify_many, status, queue_stats), the admin API (register, update,
-- unregister, decommission) and the Processor's internal functions. The
-- notifier's schema is the next migration. From v0.1.0 on, migrations are
-- only ever appended after these two (docs/upgrading.md).
--
-- Conventions
-- * Every function has a fixed search_path and schema-qualifies what it uses,
--   except the small rules the planner inlines into their callers' queries
--   (_may_take, _lane_head, _lane_of, _phash_of): a SET clause would keep it
--   from inlining them, so their bodies are SQL standard ones, bound to their
--   objects and operators when this migration creates them.
-- * SECURITY DEFINER only where a less privileged role must reach data it
--   cannot touch: the producer and admin API, and a few internals named below.
-- * Errors raised on purpose use SQLSTATE class 'PR', so callers branch on
--   the code, not the text (docs/reference.md lists them).
-- * No advisory lock anywhere. Advisory locks carry no permissions: any login
--   that can connect could hold pgrelay's keys and stall every producer, a
--   lane, a deduplicated payload or a publisher. Every mutual exclusion is a
--   lock on a row or table of pgrelay's own, which only pgrelay's roles can
--   take (FOR ... UPDATE needs the UPDATE privilege).
-- * Tables this_node, channel_locks, dedup_locks, publish_leases and
--   schema_migrations belong to their node and are never replicated
--   (migrations.NodeLocalTables); every other table replicates on a
--   multi-master cluster.

-- ---------------------------------------------------------------------------
-- Roles and schema
-- ---------------------------------------------------------------------------

CREATE SCHEMA IF NOT EXISTS pgrelay;

-- Roles a DBA grants to logins. Roles are cluster-wide, so they may already exist
-- (another database of the same cluster migrated first, or is migrating now: the
-- migration lock is per database, so two may create a role at once).
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pgrelay_producer') THEN
    BEGIN
      CREATE ROLE pgrelay_producer NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;  -- created meanwhile by the migration of another database
    END;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pgrelay_processor') THEN
    BEGIN
      CREATE ROLE pgrelay_processor NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;  -- created meanwhile by the migration of another database
    END;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pgrelay_admin') THEN
    BEGIN
      CREATE ROLE pgrelay_admin NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;  -- created meanwhile by the migration of another database
    END;
  END IF;
END
$$;

-- Functions are executable by PUBLIC when created unless the schema's default
-- privileges say otherwise: none of pgrelay's is.
ALTER DEFAULT PRIVILEGES IN SCHEMA pgrelay REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- This node's id, and ids
-- ---------------------------------------------------------------------------

-- _node_setting: the session's pg_relay.node_id, 0 when unset. Raises PR020
-- for a value that is not a node id.
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

-- The node's id as the DBA configured it, written by the migration from the
-- migrating session and again by every Processor as it starts
-- (_record_node(), from its own setting or --node-id). Producers cannot
-- forge it: a producer that SET pg_relay.node_id in its session before
-- notify() would pin events to a node that never runs them and draw ids
-- carrying another node's number. wake_key, a random value only pgrelay's
-- roles read, keys the digests in wake-ups (_queue_wake). Node-local.
CREATE TABLE pgrelay.this_node (
  singleton  bool PRIMARY KEY DEFAULT true,
  node_id    int NOT NULL,
  wake_key   text NOT NULL DEFAULT pg_catalog.md5(pg_catalog.gen_random_uuid()::text),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT this_node_singleton CHECK (singleton),
  CONSTRAINT this_node_node CHECK (node_id BETWEEN 0 AND 1023)
);
INSERT INTO pgrelay.this_node (node_id) VALUES (pgrelay._node_setting());

-- _this_node: this node's id for the caller: the recorded one
-- (pgrelay.this_node), except that a session of a login in
-- pgrelay_processor or pgrelay_admin (superusers included) keeps its own
-- pg_relay.node_id, so a Processor's --node-id and an admin's session stay
-- theirs. A session whose setting equals the recorded id (the common case:
-- the database's setting) costs one read of a one-row table.
CREATE FUNCTION pgrelay._this_node() RETURNS int
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
-- starts and by `pgrelay migrate`. SECURITY DEFINER: no role may write
-- pgrelay.this_node itself.

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

-- The generator's state: a 53-bit counter (milliseconds << 12 | sequence) held in
-- a sequence, the only non-transactional counter PostgreSQL has. CACHE 1 keeps
-- the values handed out on a node in one global order.
CREATE SEQUENCE pgrelay._id_seq AS bigint MINVALUE 0 START 0 CACHE 1;

-- _next_id_at: the generator for a given clock reading (milliseconds since
-- 2026-01-01 00:00 UTC). Split out from _next_id so tests can step the clock
-- back.
--
-- Layout: 41-bit milliseconds | 10-bit node id | 12-bit sequence.
-- Uniqueness rests on nextval alone: every id is either a nextval result or
-- the target of a setval that moves the counter forward past it. The counter
-- is moved forward to the clock only when it lags by more than 100 ms worth
-- of values, and by one session at a time (a setval race could move it
-- back), so no id lags the clock by more than 100 ms (the NATS publisher's
-- horizon relies on that). A clock that steps back leaves the counter where
-- it is: ids keep growing. More than 4096 ids in one millisecond run the
-- counter into the next millisecond, as pgEdge's snowflake does.
--
-- The move is guarded by a lock of this node's row of pgrelay.this_node, taken
-- in a subtransaction rolled back at once (PR099 never leaves this function):
-- the row lock ends with it, setval (not transactional) stays. So it is held
-- for the few statements of the move, never to the end of a producer's
-- transaction (which would hold back every id of the database), and only by a
-- session inside this function. Under load every session that draws an id
-- while the counter lags would queue for an exclusive lock in turn, so one
-- session takes the row without waiting (SKIP LOCKED) and moves the counter;
-- the others wait for it with FOR KEY SHARE, which conflicts only with the
-- mover's FOR UPDATE and so releases all of them at once, and draw again.
-- Should the counter still lag (the mover read an older clock), they take the
-- row as movers in turn.
CREATE FUNCTION pgrelay._next_id_at(p_ms bigint) RETURNS bigint
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

CREATE FUNCTION pgrelay._next_id() RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT pgrelay._next_id_at(
    (pg_catalog.floor(EXTRACT(epoch FROM pg_catalog.clock_timestamp()) * 1000))::bigint - 1767225600000)
$$;

-- _next_ids: p_n ids of _next_id's kind in one call, for a batch of log rows:
-- the first from _next_id (which moves the counter up to the clock when it
-- lags), the others straight from the counter right after it, so they lag
-- the clock no more than the first. One call per batch, not one per row.

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

-- _id_floor: the smallest id a timestamp can carry on any node; used to turn
-- "older than" into a primary-key range.
CREATE FUNCTION pgrelay._id_floor(p_at timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT GREATEST(0,
    (pg_catalog.floor(EXTRACT(epoch FROM p_at) * 1000))::bigint - 1767225600000) << 22
$$;

-- ---------------------------------------------------------------------------
-- Channels
-- ---------------------------------------------------------------------------

-- One row per channel: where its events go (handler, kind) and how
-- (concurrency_mode, deduplicate, node_restricted, retries, expiry, timeout,
-- pause). Events published on NATS carry the payload only when the channel
-- opts in (payloads may hold secrets); publish_errors says what of a
-- failure's error goes to NATS: 'class' (error_class only, no free text),
-- 'text' (error_class and the full text) or 'none'. pgrelay.log keeps the
-- full text for operators.
CREATE TABLE pgrelay.channels (
  channel          text PRIMARY KEY,
  handler          text NOT NULL,
  kind             text NOT NULL,
  concurrency_mode text NOT NULL DEFAULT 'none',
  deduplicate      bool NOT NULL DEFAULT false,
  node_restricted  bool NOT NULL DEFAULT false,
  max_attempts     int NOT NULL DEFAULT 5,
  retry_delay      interval NOT NULL DEFAULT '1 second',
  expire_after     interval NULL,
  timeout          interval NOT NULL DEFAULT '30 seconds',
  paused           bool NOT NULL DEFAULT false,
  publish_payload  bool NOT NULL DEFAULT false,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  publish_errors   text NOT NULL DEFAULT 'class',
  CONSTRAINT channels_name CHECK (channel ~ '^[A-Za-z0-9_-]{1,100}$'),
  CONSTRAINT channels_kind CHECK (kind IN ('sql', 'email', 'nats')),
  CONSTRAINT channels_mode CHECK (concurrency_mode IN ('none', 'channel', 'payload')),
  CONSTRAINT channels_attempts CHECK (max_attempts > 0),
  CONSTRAINT channels_retry_delay CHECK (retry_delay >= interval '0'),
  CONSTRAINT channels_expire_after CHECK (expire_after IS NULL OR expire_after > interval '0'),
  CONSTRAINT channels_timeout CHECK (timeout > interval '0')
);

-- Producers and update() / unregister() of a channel serialise: every
-- producer holds a lock on its channel until its transaction ends, and
-- update() and unregister() take the channel exclusively first. They wait
-- for the producers already in, and producers that come after wait for them
-- and then see the new state (an unknown channel, PR001; the new settings).
-- Without it a producer committing after a concurrent unregister() leaves a
-- queue row with no channel (pending forever), and one racing update()
-- enqueues under settings it read before (a channel just made serialised
-- gets a row with no lane).
--
-- The lock. notify() is on the hot path of every application transaction,
-- so producers of one channel must not serialise on it, and no login outside
-- pgrelay's roles may be able to hold it. So it is a row lock on a table of
-- pgrelay's own. Not the channel's row itself: a FOR KEY SHARE lock on one
-- row held by several transactions at once makes PostgreSQL create a
-- MultiXact for every new locker (measured: one per notify() with 16
-- producers on one channel), which fills the MultiXact member space within
-- days at a few thousand events a second and forces anti-wraparound vacuums
-- of every table of the database.
--
-- So each channel has 64 lock rows. A producer locks one that no other
-- transaction holds, FOR NO KEY UPDATE SKIP LOCKED, starting at its backend's
-- own slot (pid mod 64), so concurrent producers lock different rows: no
-- MultiXact and no waiting. Only when all 64 are held (more than 64 producers
-- of the channel at once, or an update() or unregister()) does it share its
-- own slot FOR KEY SHARE, which does not wait for another producer (a
-- MultiXact only in that overload) and does wait for update() or
-- unregister(). Those lock every row of the channel FOR UPDATE, in slot order
-- (two of them do not deadlock), and bump changes, so that a producer in a
-- REPEATABLE READ or SERIALIZABLE transaction whose snapshot predates the
-- change fails with a serialisation failure instead of enqueueing under
-- settings it no longer may see. The cost: an index probe and a WAL record
-- per producer transaction.
--
-- Node-local, like the locks they carry: not replicated. A trigger that fires
-- for replicated rows too (ENABLE ALWAYS) creates them wherever a channel row
-- appears. A channel without lock rows on this node (one inserted by hand
-- while the trigger was off) still serialises: the producer then locks the
-- channel's row FOR KEY SHARE.
CREATE TABLE pgrelay.channel_locks (
  channel text NOT NULL,
  slot    int NOT NULL,
  -- Bumped by every update() and unregister() (see above).
  changes bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (channel, slot),
  CONSTRAINT channel_locks_slot CHECK (slot BETWEEN 0 AND 63)
);

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

-- _check_channel: the validation register() and update() share, each field
-- refused with its own SQLSTATE (PR010-PR018).
--
-- Upper bounds, each refused with a message naming the bound:
--   max_attempts  <= 1000      PR013
--   timeout       <= 24 hours  PR014
--   retry_delay   <= 24 hours  PR015
--   expire_after  <= 365 days  PR016
-- * timeout becomes the handler's statement_timeout, an int of milliseconds
--   (at most 2^31-1 ms, about 24.8 days: a larger value fails every attempt),
--   and a Go time.Duration in the Processor; a direct batch's deadline adds
--   up the timeouts of its events. 24 hours is far beyond any handler an
--   outbox should run inside a transaction, and 24 h x the largest batch
--   stays far from the Duration's limit.
-- * retry_delay feeds _backoff(): retry_delay x 2^min(attempt-1, 20), capped
--   at max(retry_delay, 1 hour), x 0.8-1.2 jitter. The product is computed
--   before the cap: at 24 hours it is 24 h x 2^20, about 2 900 years, well
--   inside an interval; unbounded, a retry_delay of a few thousand years
--   would overflow the interval in _complete() and fail the Processor's
--   whole completion batch, at every try.
-- * max_attempts: the bound keeps an event from being retried (and logged)
--   forever. 1000 attempts at the 1 hour cap retry for more than a month.
-- * expire_after is added to the enqueue (or due) time; 365 days keeps
--   expires_at finite. NULL (or update()'s '0') means "never expires".
--   '1 year' compares as 360 days and is accepted.
-- Intervals compare as PostgreSQL compares them ('1 day' = '24 hours').
-- A bound holds a value only when it is given anew (register() of a new
-- channel or with another value, update() of that field), never the stored
-- value: an identical register() stays a no-op and update(p_paused := ...)
-- works on any stored channel, as it does for a handler whose function was
-- dropped.
--
-- A nats channel's subject follows the rules of events.ValidSubject and
-- events.CheckChannelSubject (the nats handler applies them again before it
-- publishes): dot-separated tokens, none empty or holding '*', '>', a
-- character up to U+0020 or DEL; not under "pgrelay." (the events stream
-- captures pgrelay.>, so the channel's messages would land among pgrelay's
-- own status events); not in a namespace NATS keeps for itself: "$"
-- subjects ($JS.API. reaches the JetStream API, where a message can delete a
-- stream; $KV., $O., $SYS.) and "_INBOX" or below it (the reply inboxes of
-- NATS clients). PR017, checked when the handler or the kind is given.
CREATE FUNCTION pgrelay._check_channel(c pgrelay.channels, p_check_handler bool DEFAULT true) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_stmt text;
  v_types text[];
  old pgrelay.channels;
BEGIN
  IF c.channel IS NULL THEN
    RAISE EXCEPTION 'pgrelay: channel name must not be NULL' USING ERRCODE = 'PR010';
  END IF;
  IF c.channel !~ '^[A-Za-z0-9_-]{1,100}$' THEN
    RAISE EXCEPTION 'pgrelay: channel name % is invalid: use 1 to 100 letters, digits, "_" or "-"',
      pg_catalog.quote_literal(c.channel) USING ERRCODE = 'PR010';
  END IF;
  IF c.kind IS NULL OR c.kind NOT IN ('sql', 'email', 'nats') THEN
    RAISE EXCEPTION 'pgrelay: channel %: unknown kind % (expected sql, email or nats)',
      c.channel, COALESCE(pg_catalog.quote_literal(c.kind), 'NULL') USING ERRCODE = 'PR011';
  END IF;
  IF c.concurrency_mode IS NULL OR c.concurrency_mode NOT IN ('none', 'channel', 'payload') THEN
    RAISE EXCEPTION 'pgrelay: channel %: unknown concurrency_mode % (expected none, channel or payload)',
      c.channel, COALESCE(pg_catalog.quote_literal(c.concurrency_mode), 'NULL') USING ERRCODE = 'PR012';
  END IF;
  IF c.max_attempts IS NULL OR c.max_attempts <= 0 THEN
    RAISE EXCEPTION 'pgrelay: channel %: max_attempts must be positive, got %', c.channel,
      COALESCE(c.max_attempts::text, 'NULL') USING ERRCODE = 'PR013';
  END IF;
  IF c.timeout IS NULL OR c.timeout <= interval '0' THEN
    RAISE EXCEPTION 'pgrelay: channel %: timeout must be positive, got %', c.channel,
      COALESCE(c.timeout::text, 'NULL') USING ERRCODE = 'PR014';
  END IF;
  IF c.retry_delay IS NULL OR c.retry_delay < interval '0' THEN
    RAISE EXCEPTION 'pgrelay: channel %: retry_delay must not be negative, got %', c.channel,
      COALESCE(c.retry_delay::text, 'NULL') USING ERRCODE = 'PR015';
  END IF;
  IF c.expire_after IS NOT NULL AND c.expire_after <= interval '0' THEN
    RAISE EXCEPTION 'pgrelay: channel %: expire_after must be positive, got %', c.channel,
      c.expire_after USING ERRCODE = 'PR016';
  END IF;
  -- The upper bounds, for values given anew: not the stored value of the
  -- channel (old is all NULL for a new channel).
  SELECT x.* INTO old FROM pgrelay.channels x WHERE x.channel = c.channel;
  IF c.max_attempts > 1000 AND c.max_attempts IS DISTINCT FROM old.max_attempts THEN
    RAISE EXCEPTION 'pgrelay: channel %: max_attempts must be at most 1000, got %', c.channel,
      c.max_attempts USING ERRCODE = 'PR013';
  END IF;
  IF c.timeout > interval '24 hours' AND c.timeout IS DISTINCT FROM old.timeout THEN
    RAISE EXCEPTION 'pgrelay: channel %: timeout must be at most 24 hours, got %', c.channel,
      c.timeout USING ERRCODE = 'PR014';
  END IF;
  IF c.retry_delay > interval '24 hours' AND c.retry_delay IS DISTINCT FROM old.retry_delay THEN
    RAISE EXCEPTION 'pgrelay: channel %: retry_delay must be at most 24 hours, got %', c.channel,
      c.retry_delay USING ERRCODE = 'PR015';
  END IF;
  IF c.expire_after > interval '365 days' AND c.expire_after IS DISTINCT FROM old.expire_after THEN
    RAISE EXCEPTION 'pgrelay: channel %: expire_after must be at most 365 days, got %', c.channel,
      c.expire_after USING ERRCODE = 'PR016',
      HINT = 'Leave it NULL for events that never expire.';
  END IF;
  IF c.publish_errors IS NULL OR c.publish_errors NOT IN ('class', 'text', 'none') THEN
    RAISE EXCEPTION 'pgrelay: channel %: unknown publish_errors % (expected class, text or none)',
      c.channel, COALESCE(pg_catalog.quote_literal(c.publish_errors), 'NULL') USING ERRCODE = 'PR018';
  END IF;
  IF c.handler IS NULL OR pg_catalog.btrim(c.handler) = '' THEN
    RAISE EXCEPTION 'pgrelay: channel %: handler must not be empty', c.channel USING ERRCODE = 'PR017';
  END IF;
  IF NOT p_check_handler THEN
    RETURN;
  END IF;
  IF c.kind = 'sql' THEN
    -- The handler must prepare as one statement with one text parameter ($1 = payload).
    --
    -- One statement: the text is spliced into a PREPARE below, and a ';' would end
    -- the PREPARE and run whatever follows it, as the owner of register() (a
    -- SECURITY DEFINER function). PostgreSQL only separates statements with ';', so
    -- refusing any ';' but trailing ones is a safe (if conservative) test.
    IF pg_catalog.strpos(pg_catalog.rtrim(c.handler, E' \t\r\n;'), ';') > 0 THEN
      RAISE EXCEPTION 'pgrelay: channel %: handler must be a single statement (no ";" but a trailing one)',
        c.channel USING ERRCODE = 'PR017',
        HINT = 'Write a semicolon inside a string literal as chr(59).';
    END IF;
    v_stmt := 'pgrelay_check_' || pg_catalog.pg_backend_pid();
    -- With $1 declared text, as the contract says.
    BEGIN
      EXECUTE pg_catalog.format('PREPARE %I(text) AS %s', v_stmt, c.handler);
      SELECT p.parameter_types::text[] INTO v_types
        FROM pg_catalog.pg_prepared_statements p WHERE p.name = v_stmt;
      EXECUTE pg_catalog.format('DEALLOCATE %I', v_stmt);
    EXCEPTION WHEN OTHERS THEN
      RAISE EXCEPTION 'pgrelay: channel %: handler does not prepare as one statement with one text parameter ($1): %',
        c.channel, SQLERRM USING ERRCODE = 'PR017', HINT = 'Example: SELECT app.refresh_view($1)';
    END;
    -- A PREPARE with declared types accepts further parameters it can type
    -- ('SELECT $2::int'); the Processor binds exactly one.
    IF v_types IS DISTINCT FROM ARRAY['text'] THEN
      RAISE EXCEPTION 'pgrelay: channel %: handler must take exactly one parameter ($1), it takes % (%)',
        c.channel, COALESCE(pg_catalog.cardinality(v_types), 0), pg_catalog.array_to_string(v_types, ', ')
        USING ERRCODE = 'PR017', HINT = 'Example: SELECT app.refresh_view($1)';
    END IF;
  ELSIF c.kind = 'nats' THEN
    IF c.handler !~ '^[^\x01-\x20\x7f.*>]+(\.[^\x01-\x20\x7f.*>]+)*$' THEN
      RAISE EXCEPTION 'pgrelay: channel %: % is not a valid NATS subject (dot-separated tokens, no spaces, control characters or wildcards)',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017';
    END IF;
    IF c.handler ~ '^pgrelay\.' THEN
      RAISE EXCEPTION 'pgrelay: channel %: subject % is under "pgrelay.", where pgrelay publishes its own events',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017',
        HINT = 'The events stream captures pgrelay.>; choose a subject outside it, e.g. app.orders.';
    END IF;
    IF c.handler ~ '^\$' THEN
      RAISE EXCEPTION 'pgrelay: channel %: subject % is reserved: NATS keeps subjects starting with "$" ($JS, $KV, $O, $SYS, ...) for itself',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017',
        HINT = 'Choose a subject of the application, e.g. app.orders.';
    END IF;
    IF c.handler ~ '^_INBOX(\.|$)' THEN
      RAISE EXCEPTION 'pgrelay: channel %: subject % is reserved: _INBOX. holds the reply inboxes of NATS clients',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017',
        HINT = 'Choose a subject of the application, e.g. app.orders.';
    END IF;
  END IF;
END
$$;

-- register: creates a channel. A channel that exists with the same
-- definition (every parameter equal to the stored value; intervals compare as
-- PostgreSQL compares them, so '60 minutes' equals '1 hour') is left as it is
-- (not resumed if paused, no timestamp moved): a deployment script that
-- registers its channels runs on every node of a cluster, and on the second
-- node the channel's row has already arrived by replication. A different
-- definition fails with PR003, naming each field that differs with the
-- registered and the given value. Concurrent register() calls of one name
-- serialise on the primary key (INSERT ... ON CONFLICT waits for an
-- uncommitted insert of the name).
CREATE FUNCTION pgrelay.register(

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
  p_publish_payload bool DEFAULT false,
  p_publish_errors text DEFAULT 'class'
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
  c.publish_errors := p_publish_errors;
  PERFORM pgrelay._check_channel(c);
  LOOP
    INSERT INTO pgrelay.channels (channel, handler, kind, concurrency_mode, deduplicate,
                                  node_restricted, max_attempts, retry_delay, expire_after, timeout,
                                  publish_payload, publish_errors)
    VALUES (c.channel, c.handler, c.kind, c.concurrency_mode, c.deduplicate,
            c.node_restricted, c.max_attempts, c.retry_delay, c.expire_after, c.timeout,
            c.publish_payload, c.publish_errors)
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
  IF old.publish_errors IS DISTINCT FROM c.publish_errors THEN
    v_diff := v_diff || pg_catalog.format('publish_errors (%s registered, %s given)',
      old.publish_errors, c.publish_errors);
  END IF;
  IF pg_catalog.cardinality(v_diff) > 0 THEN
    RAISE EXCEPTION 'pgrelay: channel % already exists with a different definition: %',
      pg_catalog.quote_literal(p_channel), pg_catalog.array_to_string(v_diff, ', ')
      USING ERRCODE = 'PR003',
            HINT = 'Use pgrelay.update() to change it; registering an identical definition again is a no-op.';
  END IF;
END
$$;

-- update: changes a channel's settings; NULL means unchanged,
-- p_expire_after := '0' removes the expiry. Takes the channel exclusively
-- first (_lock_channel_exclusive): producers already in finish first, later
-- ones see the new settings.
CREATE FUNCTION pgrelay.update(

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
  p_publish_payload bool DEFAULT NULL,
  p_publish_errors text DEFAULT NULL
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
  c.publish_errors := COALESCE(p_publish_errors, old.publish_errors);
  -- The handler is re-checked only when it or the kind changes: pausing a
  -- channel whose handler's function was dropped must still work.
  PERFORM pgrelay._check_channel(c, c.handler IS DISTINCT FROM old.handler OR c.kind IS DISTINCT FROM old.kind);
  UPDATE pgrelay.channels x
     SET handler = c.handler, kind = c.kind, concurrency_mode = c.concurrency_mode,
         deduplicate = c.deduplicate, node_restricted = c.node_restricted,
         max_attempts = c.max_attempts, retry_delay = c.retry_delay,
         expire_after = c.expire_after, timeout = c.timeout, paused = c.paused,
         publish_payload = c.publish_payload, publish_errors = c.publish_errors, updated_at = now()
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
         SET lane = pgrelay._lane_of(c.concurrency_mode, q.payload),
             phash = pgrelay._phash_of(c.deduplicate, q.payload),
             run_in_node = CASE WHEN c.node_restricted THEN COALESCE(q.run_in_node, q.owner_node) END
       WHERE q.channel = p_channel AND q.dispatched_at IS NULL;
      UPDATE pgrelay.queue q
         SET lane = pgrelay._lane_of(c.concurrency_mode, q.payload)
       WHERE q.channel = p_channel AND q.dispatched_at IS NOT NULL;
      EXIT WHEN NOT EXISTS (
        SELECT FROM pgrelay.queue q
         WHERE q.channel = p_channel
           AND (q.lane IS DISTINCT FROM pgrelay._lane_of(c.concurrency_mode, q.payload)
                OR (q.dispatched_at IS NULL
                    AND (q.phash IS DISTINCT FROM pgrelay._phash_of(c.deduplicate, q.payload)
                         OR (q.run_in_node IS NULL) = c.node_restricted))));
    END LOOP;
  END IF;
END
$$;

-- unregister: removes a channel, refusing one with pending or in-flight
-- events unless p_force discards them (PR004). Takes the channel exclusively
-- first; the channel's lock rows go with it, and a forced one also removes
-- the retry rows that completions it waited for scheduled meanwhile.
CREATE FUNCTION pgrelay.unregister(p_channel text, p_force bool DEFAULT false) RETURNS void
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
-- The queue and its triggers
-- ---------------------------------------------------------------------------

-- Pending and in-flight work only: a row is deleted when its attempt ends
-- (a retry is a new row naming its predecessor in retry_of).
CREATE TABLE pgrelay.queue (
  id            bigint PRIMARY KEY DEFAULT pgrelay._next_id(),
  origin_id     bigint NOT NULL,
  channel       text NOT NULL,
  payload       text NOT NULL,
  owner_node    int NOT NULL DEFAULT pgrelay._this_node(),
  run_in_node   int NULL,
  attempt       int NOT NULL DEFAULT 1,
  retry_of      bigint NULL,
  enqueued_at   timestamptz NOT NULL DEFAULT now(),
  not_before    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NULL,
  dispatched_at timestamptz NULL,
  dispatched_by bigint NULL,
  -- Serialisation key, derived on insert from the channel's concurrency_mode:
  -- NULL for 'none', 0 for 'channel', a 64-bit hash of the payload for 'payload'.
  lane          bigint NULL,
  -- Hash of the payload for channels with deduplicate, else NULL.
  phash         bigint NULL,
  CONSTRAINT queue_attempt CHECK (attempt > 0)
);

-- The claim of 'none' channels: ready rows of a channel in readiness order.
-- Also serves per-channel pending counts.
CREATE INDEX queue_ready ON pgrelay.queue (channel, not_before, id)
  WHERE dispatched_at IS NULL;
-- The heads of serialised lanes, oldest notification first. id is in the key
-- because the head query orders by (origin_id, id): without it a lane the
-- planner guesses small (any 'payload' lane in a generic plan) is read whole and
-- sorted on every claim, however long it has grown.
CREATE INDEX queue_lane ON pgrelay.queue (channel, lane, origin_id, id)
  WHERE dispatched_at IS NULL AND lane IS NOT NULL;
-- In-flight rows: few at any time (bounded by the Processors' slots).
CREATE INDEX queue_inflight ON pgrelay.queue (dispatched_by)
  WHERE dispatched_at IS NOT NULL;
CREATE INDEX queue_inflight_lane ON pgrelay.queue (channel, lane)
  WHERE dispatched_at IS NOT NULL AND lane IS NOT NULL;
-- Deduplication lookups.
CREATE INDEX queue_dedup ON pgrelay.queue (channel, phash)
  WHERE dispatched_at IS NULL AND phash IS NOT NULL;
-- status() of a notification whose current row is a retry (attempt-1 rows have
-- id = origin_id and are found by the primary key).
CREATE INDEX queue_retry_origin ON pgrelay.queue (origin_id)
  WHERE retry_of IS NOT NULL;

-- A high-churn table: vacuum after a fixed number of dead rows rather than a
-- fraction of the table, without cost-based throttling, so dead index entries
-- at the head of the claim index are cleaned within seconds under load.
ALTER TABLE pgrelay.queue SET (
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 5000,
  autovacuum_vacuum_insert_scale_factor = 0,
  autovacuum_vacuum_insert_threshold = 20000,
  autovacuum_analyze_scale_factor = 0,
  autovacuum_analyze_threshold = 20000,
  autovacuum_vacuum_cost_delay = 0
);

-- _lane_of and _phash_of: a queue row's serialisation key (lane) under its
-- channel's concurrency_mode, and its deduplication hash (phash), from its
-- payload. The one statement of each, for the stamping trigger and for
-- update(), which re-derives them when the channel's settings change (and
-- _enqueue_dedup looks rows up by the hash). Inlined like _may_take
-- (LANGUAGE sql, no SET clause, SQL standard body).
CREATE FUNCTION pgrelay._lane_of(p_concurrency_mode text, p_payload text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE p_concurrency_mode
         WHEN 'channel' THEN 0
         WHEN 'payload' THEN pg_catalog.hashtextextended(p_payload, 0)
       END;

CREATE FUNCTION pgrelay._phash_of(p_deduplicate bool, p_payload text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_deduplicate THEN pg_catalog.hashtextextended(p_payload, 0) END;

-- _pin_of and _expiry_of: a row's run_in_node (the node it is enqueued on,
-- for a node_restricted channel; else none) and its expires_at (the due time,
-- the later of enqueued_at and not_before, plus the channel's expire_after;
-- NULL when the channel's events never expire). _id_node: the node bits of
-- an id (see _next_id_at). Inlined like _lane_of.
CREATE FUNCTION pgrelay._pin_of(p_node_restricted bool, p_node int) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_node_restricted THEN p_node END;

CREATE FUNCTION pgrelay._expiry_of(p_expire_after interval, p_enqueued_at timestamptz, p_not_before timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
RETURN GREATEST(p_enqueued_at, p_not_before) + p_expire_after;

CREATE FUNCTION pgrelay._id_node(p_id bigint) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ((p_id >> 12) & 1023)::int;

-- _queue_before_insert: derives a queue row's columns from its channel
-- (run_in_node, lane, phash, expires_at, and origin_id when not given) for
-- the rows inserted into pgrelay.queue directly: direct inserts of companion
-- applications and the retry rows of a completion. The producer functions
-- (notify(), notify_many(), the deduplicating insert) insert through
-- _enqueue, which derives the same columns with the same helpers (_pin_of,
-- _lane_of, _phash_of, _expiry_of) once per statement: they run with
-- pgrelay.stamped = 'on' (set by _enqueue around its insert, not by a SET
-- clause: a function's SET of a custom setting needs a superuser to create
-- it since PostgreSQL 15, and the owner may not be one), and the trigger's WHEN
-- clause passes over the rows inserted while it is on. That skips a function
-- call and a read of the channel per row (four fifths of a batched insert's
-- CPU). Only pgrelay_processor and the schema's owner may insert into
-- pgrelay.queue at all (producers may not), and both may update its rows
-- anyway: setting pgrelay.stamped in their own session gives them nothing
-- they do not have.
--
-- ENABLE ALWAYS, so that it fires under session_replication_role = replica
-- too, where an ordinary trigger does not: a companion's replication-aware
-- trigger may call notify() in the apply worker of logical replication. The
-- apply worker (and a table synchronisation) also inserts the rows
-- replicated from other nodes, stamped where they were enqueued: those are
-- left exactly as they come (a row keeps the pin of the node it was notified
-- on, and its channel may not have reached this node yet). A replicated row
-- names its origin and carries an id another node drew (the id's node bits,
-- see _next_id_at; nodes of a cluster have distinct ids). A row enqueued
-- here carries this node's bits, in the replica role too: ids are drawn
-- where the row is enqueued.
--
-- A row inserted without origin_id (a direct insert) first takes the
-- producer's lock on its channel (_lock_channel); rows that name their
-- origin (the producer functions, which took it already, and retry rows) do
-- not. SECURITY DEFINER: the lock rows are pgrelay's, not the inserting
-- role's. A row that sets not_before later than its enqueued_at (a delayed
-- notify, or a direct insert doing the same) expires that long after its
-- not_before. Retry rows keep the expiry of their first attempt.
--
-- In the replica role no statement trigger fires either: a row of a
-- publish_payload channel enqueued there keeps its payload here, as
-- queue_keep_payloads does in the origin role (_enqueue keeps those of the
-- producer functions' rows).
CREATE FUNCTION pgrelay._queue_before_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels;
  v_replica bool := pg_catalog.current_setting('session_replication_role') = 'replica';
BEGIN
  IF v_replica AND NEW.origin_id IS NOT NULL
     AND pgrelay._id_node(NEW.id) <> pgrelay._this_node() THEN
    RETURN NEW;
  END IF;
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
  NEW.run_in_node := pgrelay._pin_of(ch.node_restricted, pgrelay._this_node());
  NEW.lane := pgrelay._lane_of(ch.concurrency_mode, NEW.payload);
  NEW.phash := pgrelay._phash_of(ch.deduplicate, NEW.payload);
  IF NEW.retry_of IS NULL AND NEW.expires_at IS NULL THEN
    NEW.expires_at := pgrelay._expiry_of(ch.expire_after, NEW.enqueued_at, NEW.not_before);
  END IF;
  IF v_replica AND ch.publish_payload THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload) VALUES (NEW.id, NEW.payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER queue_before_insert BEFORE INSERT ON pgrelay.queue
  FOR EACH ROW WHEN (pg_catalog.current_setting('pgrelay.stamped', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION pgrelay._queue_before_insert();
ALTER TABLE pgrelay.queue ENABLE ALWAYS TRIGGER queue_before_insert;

-- Wake-ups on demand. A transaction that sends NOTIFY takes a lock at
-- commit that every other notifying transaction of the server waits for, so
-- a NOTIFY per producer transaction would line up all their commits (and
-- their WAL flushes) one behind the other. A producer therefore sends one
-- only when a Processor of this node asked for it: each slot of
-- pgrelay.wake_slots (channels hash onto 1024) is armed by a Processor and
-- taken by the first producer that enqueues on it, which sends the
-- notification; the others find it taken and send nothing. A Processor arms
-- the slots again as soon as a notification reaches it, and then claims
-- until every transaction that was in progress when it armed them has ended
-- (pgrelay._arm_wakes, the Processor's armer): a producer that found its
-- slot taken had already inserted its rows by then, so its rows are seen
-- by one of those claims. The table is unlogged and node-local: its writes
-- cost no WAL, and a slot missing (a fresh or crashed server, a node whose
-- Processors never ran) means "send", as does a transaction that is not READ
-- COMMITTED (its snapshot may predate the arming).
CREATE UNLOGGED TABLE pgrelay.wake_slots (
  slot  int PRIMARY KEY,
  armed bool NOT NULL,
  CONSTRAINT wake_slots_slot CHECK (slot BETWEEN 0 AND 1023)
);
INSERT INTO pgrelay.wake_slots (slot, armed)
SELECT g.s, true FROM pg_catalog.generate_series(0, 1023) AS g(s);

CREATE FUNCTION pgrelay._wake_slot(p_channel text) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pg_catalog.hashtext(p_channel) OPERATOR(pg_catalog.&) 1023;

-- _wake: the wake-up for new rows of p_channel, if a Processor asked for one
-- (see wake_slots). Anyone may LISTEN, so the channel is named as
-- md5(wake_key || channel), wake_key a random value of this node's row that
-- only pgrelay's roles read: a Processor knows which of its batchers to
-- start, a listener outside learns only that something was enqueued.
CREATE FUNCTION pgrelay._wake(p_channel text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_slot int := pgrelay._wake_slot(p_channel);
  v_armed bool;
BEGIN
  IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
    SELECT w.armed INTO v_armed FROM pgrelay.wake_slots w WHERE w.slot = v_slot;
    IF FOUND THEN
      IF NOT v_armed THEN
        RETURN;
      END IF;
      -- Armed: take it, unless another producer is taking it right now
      -- (that one's notification is on its way).
      UPDATE pgrelay.wake_slots w SET armed = false
       WHERE w.slot = (SELECT s.slot FROM pgrelay.wake_slots s
                        WHERE s.slot = v_slot AND s.armed
                        FOR UPDATE SKIP LOCKED);
      IF NOT FOUND THEN
        RETURN;
      END IF;
    END IF;
  END IF;
  PERFORM pg_catalog.pg_notify('pgrelay',
    (SELECT pg_catalog.md5(t.wake_key OPERATOR(pg_catalog.||) p_channel) FROM pgrelay.this_node t));
END
$$;

-- _queue_wake: the wake-ups of a statement that inserted rows, one per
-- channel it inserted into: direct inserts and retry rows. The producer
-- functions' inserts (pgrelay.stamped on) pass it by: _enqueue, which knows
-- the channel, calls _wake itself, without the trigger's call and its query
-- of the statement's rows.
CREATE FUNCTION pgrelay._queue_wake() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_first text;
  v_last text;
  v_channel text;
BEGIN
  SELECT min(n.channel), max(n.channel) INTO v_first, v_last FROM new_rows n;
  IF v_first IS NULL THEN
    RETURN NULL;
  END IF;
  IF v_first = v_last THEN
    PERFORM pgrelay._wake(v_first);
  ELSE
    FOR v_channel IN SELECT DISTINCT n.channel FROM new_rows n LOOP
      PERFORM pgrelay._wake(v_channel);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER queue_wake AFTER INSERT ON pgrelay.queue
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT WHEN (pg_catalog.current_setting('pgrelay.stamped', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION pgrelay._queue_wake();

-- _arm_wakes: a Processor asks for wake-ups again: arms every slot taken
-- (creating the slots if the table is empty or partial: after a crash an
-- unlogged table starts empty). Returns how many slots it armed and, when
-- it armed any, the transactions in progress once that committed: the
-- Processor claims until they have all ended (_wake_xids_ended). Run it in
-- autocommit mode only: the snapshot must be taken after the arming
-- committed, which the function does not do itself, so it only arms; the
-- snapshot is the caller's next statement.
CREATE FUNCTION pgrelay._arm_wakes() RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_armed int;
  v_more int;
BEGIN
  UPDATE pgrelay.wake_slots w SET armed = true WHERE NOT w.armed;
  GET DIAGNOSTICS v_armed = ROW_COUNT;
  IF (SELECT pg_catalog.count(*) FROM pgrelay.wake_slots) < 1024 THEN
    INSERT INTO pgrelay.wake_slots (slot, armed)
    SELECT g.s, true FROM pg_catalog.generate_series(0, 1023) AS g(s)
    ON CONFLICT (slot) DO NOTHING;
    GET DIAGNOSTICS v_more = ROW_COUNT;
    v_armed := v_armed + v_more;
  END IF;
  RETURN v_armed;
END
$$;

-- _wake_xids_ended: whether every transaction in progress at p_snapshot
-- (pg_current_snapshot() taken after _arm_wakes committed) has ended.
CREATE FUNCTION pgrelay._wake_xids_ended(p_snapshot pg_snapshot) RETURNS bool
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT NOT EXISTS (
    SELECT 1 FROM pg_catalog.pg_snapshot_xip(p_snapshot) AS x(xid)
     WHERE pg_catalog.pg_xact_status(x.xid) OPERATOR(pg_catalog.=) 'in progress')
$$;

-- Rows that arrive through logical replication fire no ordinary trigger and no
-- NOTIFY crosses nodes: this row trigger, enabled for the replication apply
-- worker only (ENABLE REPLICA), wakes this node's Processors for them (a
-- leader dispatches rows enqueued on other nodes). NOTIFY folds duplicates
-- within a transaction, so a replicated batch costs one wake-up.
CREATE FUNCTION pgrelay._queue_wake_replica() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pg_catalog.pg_notify('pgrelay', '');
  RETURN NULL;
END
$$;

CREATE TRIGGER queue_wake_replica AFTER INSERT OR UPDATE ON pgrelay.queue
  FOR EACH ROW EXECUTE FUNCTION pgrelay._queue_wake_replica();
ALTER TABLE pgrelay.queue ENABLE REPLICA TRIGGER queue_wake_replica;

-- The payload of every queue row (first attempts and retries) of a channel
-- with publish_payload, written when the row is inserted: by the time the
-- row's outcome is published on NATS the row is gone. Only opted-in channels
-- pay for this write. Trimmed with the log (_trim_event_payloads).
CREATE TABLE pgrelay.event_payloads (
  queue_id bigint PRIMARY KEY,
  payload  text NOT NULL
);

-- Statement-level, on the transition table the queue's wake trigger already
-- captures: one query per inserting statement, nothing per row. For the rows
-- of direct inserts and retries only: the producer functions' rows
-- (pgrelay.stamped on) have their payloads kept by _enqueue, which knows the
-- channel already (a trigger call with a transition table costs a producer
-- about 18 us a statement, a notify() a fifth of its CPU).
CREATE FUNCTION pgrelay._queue_keep_payloads() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  INSERT INTO pgrelay.event_payloads (queue_id, payload)
  SELECT n.id, n.payload
    FROM new_rows n
    JOIN pgrelay.channels c ON c.channel = n.channel
   WHERE c.publish_payload
  ON CONFLICT (queue_id) DO NOTHING;
  RETURN NULL;
END
$$;

CREATE TRIGGER queue_keep_payloads AFTER INSERT ON pgrelay.queue
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT WHEN (pg_catalog.current_setting('pgrelay.stamped', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION pgrelay._queue_keep_payloads();

-- ---------------------------------------------------------------------------
-- Producers: notify, notify_many, status, queue_stats
-- ---------------------------------------------------------------------------

-- _check_notify: the checks notify() and notify_many() share; returns the
-- channel, read after taking the producer's lock on it (_lock_channel), so
-- under READ COMMITTED it is read after any update() or unregister() it
-- waited for. A paused channel is accepted: pausing a channel must never roll
-- back the application's own transactions. The events wait, pending (the
-- claims pass over paused channels), until update() resumes the channel.

CREATE FUNCTION pgrelay._check_notify(p_channel text) RETURNS pgrelay.channels
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
  RETURN ch;
END
$$;

-- _payload_ok: the payload rule, NULL and oversized payloads (1 MiB limit)
-- refused. Inlined, so notify_many() checks a whole batch in one query.
CREATE FUNCTION pgrelay._payload_ok(p_payload text) RETURNS bool
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_payload IS NOT NULL AND pg_catalog.octet_length(p_payload) <= 1048576;

-- _check_payload: raises the error of a payload _payload_ok refuses.
CREATE FUNCTION pgrelay._check_payload(p_channel text, p_payload text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF pgrelay._payload_ok(p_payload) THEN
    RETURN;
  END IF;
  IF p_payload IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify: payload for channel % must not be NULL (use an empty string)',
      pg_catalog.quote_literal(p_channel) USING ERRCODE = 'PR005';
  END IF;
  RAISE EXCEPTION 'pgrelay.notify: payload for channel % is % bytes, over the 1 MiB (1048576 bytes) limit',
    pg_catalog.quote_literal(p_channel), pg_catalog.octet_length(p_payload) USING ERRCODE = 'PR006';
END
$$;

-- _due: the due time of a notify, NULL for now. The one place of the
-- argument rules; called only when a delay argument is given.
CREATE FUNCTION pgrelay._due(p_not_before timestamptz, p_delay interval) RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_due timestamptz;
BEGIN
  IF p_not_before IS NOT NULL AND p_delay IS NOT NULL THEN
    RAISE EXCEPTION 'pgrelay.notify: give p_not_before or p_delay, not both'
      USING ERRCODE = 'PR007', HINT = 'p_not_before is a point in time; p_delay counts from now().';
  END IF;
  IF p_delay < interval '0' THEN
    RAISE EXCEPTION 'pgrelay.notify: p_delay must not be negative, got %', p_delay USING ERRCODE = 'PR008';
  END IF;
  v_due := COALESCE(p_not_before, now() + p_delay);
  IF NOT pg_catalog.isfinite(v_due) THEN
    RAISE EXCEPTION 'pgrelay.notify: the due time must be finite, got %', v_due USING ERRCODE = 'PR008';
  END IF;
  IF v_due <= now() THEN
    RETURN NULL;
  END IF;
  RETURN v_due;
END
$$;

-- _enqueue: the insert of the producer functions (notify(), notify_many(),
-- the deduplicating insert): one row per id of p_ids (drawn by the caller,
-- all on this node) with the payload at the same position of p_payloads, due
-- at p_due (NULL: now), each column derived from the channel ch (read after
-- the producer's lock on it) as _queue_before_insert derives it, in one
-- statement; the triggers pass over these rows (pgrelay.stamped is on for
-- the insert only, back off once it is done; a failed insert ends the
-- transaction or its subtransaction, which takes the setting back too). owner_node and run_in_node come from the ids' node bits: the
-- node _next_id stamped them with, so the node's id is read once per call,
-- for the id (the wake-up trigger reads the node's row for its key). It
-- keeps the payloads of a publish_payload channel itself, in the replica role
-- too (queue_keep_payloads passes over these rows).
CREATE FUNCTION pgrelay._enqueue(ch pgrelay.channels, p_ids bigint[], p_payloads text[], p_due timestamptz)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._id_node(p_ids[1]);
  v_due timestamptz := COALESCE(p_due, now());
BEGIN
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'on', true);
  INSERT INTO pgrelay.queue (id, origin_id, channel, payload, owner_node, run_in_node, not_before,
                             expires_at, lane, phash)
  SELECT u.id, u.id, ch.channel, u.payload, v_node, pgrelay._pin_of(ch.node_restricted, v_node), v_due,
         pgrelay._expiry_of(ch.expire_after, now(), v_due),
         pgrelay._lane_of(ch.concurrency_mode, u.payload), pgrelay._phash_of(ch.deduplicate, u.payload)
    FROM ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_payloads)) AS u(id, payload);
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'off', true);
  PERFORM pgrelay._wake(ch.channel);
  IF ch.publish_payload THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload)
    SELECT u.id, u.payload FROM ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_payloads)) AS u(id, payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
END
$$;

-- Producers of one payload of a deduplicating channel meet on one of these
-- 4096 rows (the payload's hash), held to the end of their transaction, so
-- the second waits for the first to commit and then sees its row.
-- Node-local.
CREATE TABLE pgrelay.dedup_locks (
  slot int PRIMARY KEY,
  CONSTRAINT dedup_locks_slot CHECK (slot BETWEEN 0 AND 4095)
);
INSERT INTO pgrelay.dedup_locks (slot) SELECT s FROM pg_catalog.generate_series(0, 4095) AS s;

-- _enqueue_dedup: the deduplicating insert of one payload, due at p_due
-- (NULL: now). A pending row with the same payload absorbs the call: its
-- origin id is returned and the suppressed call is logged as 'deduplicated'
-- under a fresh id, with queue_id naming the row that absorbed it. The
-- absorbing row stands for the call, so it must run after the notifying
-- transaction commits, or the handler misses that transaction's change.
--
-- Only a row due at the same time absorbs: an immediate notify is absorbed
-- by an immediate row or a retry, and by a delayed row only once its time has
-- come (never one still waiting: that would make the notify wait). A delayed
-- notify is absorbed only by a delayed row with exactly the same not_before
-- (never an earlier or immediate row, which would run it early, nor a
-- retry). A delayed row is told by retry_of IS NULL AND not_before >
-- enqueued_at (immediate first attempts have not_before = enqueued_at;
-- retries carry retry_of).
--
-- The match is locked FOR SHARE SKIP LOCKED until the notifying transaction
-- ends. Every claim takes a row FOR UPDATE SKIP LOCKED (a lane's head
-- included), so it passes over a row a producer holds, and a row a claim or
-- a direct batch holds (it may be running its handler right now) absorbs
-- nothing: the notify gets a row of its own. FOR SHARE, not FOR KEY SHARE:
-- FOR KEY SHARE is granted on a row that a claim updated and committed after
-- the producer's snapshot, without reading it again, so the producer could
-- absorb into a row already claimed; FOR SHARE conflicts with that update,
-- so the row is read again (READ COMMITTED: no longer pending, not absorbed)
-- or the producer fails with a serialisation failure (REPEATABLE READ).
CREATE FUNCTION pgrelay._enqueue_dedup(ch pgrelay.channels, p_payload text, p_due timestamptz)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_hash bigint := pgrelay._phash_of(true, p_payload);
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
  PERFORM pgrelay._enqueue(ch, ARRAY[v_id], ARRAY[p_payload], p_due);
  RETURN v_id;
END
$$;

-- notify: enqueues one event in the caller's transaction; returns its id.
-- The event is due at p_not_before (a timestamp) or after p_delay (an
-- interval from now()), both NULL by default: no claim takes it before,
-- and the Processor's poll picks it up once it is due. Both given: PR007; a
-- negative delay or an infinite time: PR008; a time not after now() (and a
-- zero delay) means now, an immediate notify in every respect. Expiry counts
-- from the due time (expires_at = due + expire_after), so a 24-hour delayed
-- event of a channel with a 1-hour expiry can run. In a serialised channel a
-- delayed event takes its place in its lane when notified and holds the lane
-- until it has run, as a retry in its backoff does. Without a delay no extra
-- statement runs. The row's other columns are derived by _enqueue, in the
-- replica role too.
CREATE FUNCTION pgrelay.notify(p_channel text, p_payload text,
                               p_not_before timestamptz DEFAULT NULL, p_delay interval DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  v_id bigint;
  v_due timestamptz;
BEGIN
  IF NOT pgrelay._payload_ok(p_payload) THEN
    PERFORM pgrelay._check_payload(p_channel, p_payload);
  END IF;
  IF p_not_before IS NOT NULL OR p_delay IS NOT NULL THEN
    v_due := pgrelay._due(p_not_before, p_delay);
  END IF;
  IF ch.deduplicate THEN
    RETURN pgrelay._enqueue_dedup(ch, p_payload, v_due);
  END IF;
  v_id := pgrelay._next_id();
  PERFORM pgrelay._enqueue(ch, ARRAY[v_id], ARRAY[p_payload], v_due);
  RETURN v_id;
END
$$;

-- notify_many: notify() of every payload of p_payloads, in one set-based
-- insert with ids drawn in one _next_ids call; ids are returned in the order
-- of p_payloads. The payloads are checked in one query (each one's error, in
-- their order, only when one is refused), the due time once per call, the
-- rest of each row by _enqueue.
CREATE FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[],
                                    p_not_before timestamptz DEFAULT NULL, p_delay interval DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  p text;
  v_ids bigint[];
  v_due timestamptz;
BEGIN
  IF p_payloads IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify_many: payloads must not be NULL' USING ERRCODE = 'PR005';
  END IF;
  IF EXISTS (SELECT FROM pg_catalog.unnest(p_payloads) AS u(p) WHERE NOT pgrelay._payload_ok(u.p)) THEN
    FOREACH p IN ARRAY p_payloads LOOP
      PERFORM pgrelay._check_payload(p_channel, p);
    END LOOP;
  END IF;
  IF p_not_before IS NOT NULL OR p_delay IS NOT NULL THEN
    v_due := pgrelay._due(p_not_before, p_delay);
  END IF;
  IF ch.deduplicate THEN
    FOREACH p IN ARRAY p_payloads LOOP
      RETURN NEXT pgrelay._enqueue_dedup(ch, p, v_due);
    END LOOP;
    RETURN;
  END IF;
  IF pg_catalog.cardinality(p_payloads) = 0 THEN
    RETURN;
  END IF;
  v_ids := pgrelay._next_ids(pg_catalog.cardinality(p_payloads));
  PERFORM pgrelay._enqueue(ch, v_ids, p_payloads, v_due);
  RETURN QUERY SELECT u.id FROM pg_catalog.unnest(v_ids) AS u(id);
END
$$;

-- status: the fold of a notification's rows and events.
CREATE FUNCTION pgrelay.status(p_id bigint) RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v text;
BEGIN
  SELECT CASE WHEN q.dispatched_at IS NOT NULL THEN 'in_flight'
              WHEN q.attempt > 1 THEN 'retrying'
              ELSE 'pending' END
    INTO v
    FROM pgrelay.queue q
   WHERE (q.id = p_id AND q.origin_id = p_id)
      OR (q.origin_id = p_id AND q.retry_of IS NOT NULL)
   ORDER BY q.attempt DESC
   LIMIT 1;
  IF FOUND THEN
    RETURN v;
  END IF;
  SELECT l.event INTO v
    FROM pgrelay.log l
   WHERE l.origin_id = p_id AND l.event IN ('succeeded', 'gave_up', 'expired', 'deduplicated')
   ORDER BY l.id DESC
   LIMIT 1;
  RETURN v;
END
$$;

-- queue_stats: one row per channel, cheap on a large queue. A channel's
-- pending rows are read through the queue_ready index, at most 100 000 of
-- them (the earliest ready first); past that, pending is the planner's
-- estimate and retrying is scaled from the rows read (pending_estimated is
-- then true). In-flight rows are few and always counted exactly.
-- pending_restricted is the pending count of a node-restricted channel (every
-- row of such a channel is pinned), 0 otherwise. VOLATILE because PostgreSQL
-- refuses EXPLAIN in a non-volatile function. Runs as its caller: every role
-- granted it may read the channels and the queue (and EXPLAIN them).

CREATE FUNCTION pgrelay.queue_stats()
RETURNS TABLE (channel text, pending bigint, pending_restricted bigint, in_flight bigint,
               retrying bigint, oldest_pending timestamptz, kind text,
               concurrency_mode text, paused bool, pending_estimated bool)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  c pgrelay.channels;
  v_inflight jsonb;
  v_n bigint;
  v_retry bigint;
  v_oldest timestamptz;
  v_plan json;
  v_est bigint;
BEGIN
  SELECT COALESCE(pg_catalog.jsonb_object_agg(f.channel, f.n), '{}')
    INTO v_inflight
    FROM (SELECT q.channel, count(*) AS n FROM pgrelay.queue q
           WHERE q.dispatched_at IS NOT NULL GROUP BY q.channel) f;
  FOR c IN SELECT * FROM pgrelay.channels x ORDER BY x.channel LOOP
    SELECT count(*), count(*) FILTER (WHERE s.attempt > 1), min(s.enqueued_at)
      INTO v_n, v_retry, v_oldest
      FROM (SELECT q.attempt, q.enqueued_at FROM pgrelay.queue q
             WHERE q.channel = c.channel AND q.dispatched_at IS NULL
             ORDER BY q.not_before LIMIT 100001) s;
    channel := c.channel;
    kind := c.kind;
    concurrency_mode := c.concurrency_mode;
    paused := c.paused;
    oldest_pending := v_oldest;
    in_flight := COALESCE((v_inflight ->> c.channel)::bigint, 0);
    pending_estimated := v_n > 100000;
    IF pending_estimated THEN
      EXECUTE pg_catalog.format('EXPLAIN (FORMAT JSON) SELECT 1 FROM pgrelay.queue q '
                                'WHERE q.channel = %L AND q.dispatched_at IS NULL', c.channel)
        INTO v_plan;
      v_est := GREATEST(v_n, ((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::numeric)::bigint);
      retrying := (v_retry::numeric * v_est / v_n)::bigint;
      pending := v_est;
    ELSE
      pending := v_n;
      retrying := v_retry;
    END IF;
    pending_restricted := CASE WHEN c.node_restricted THEN pending ELSE 0 END;
    RETURN NEXT;
  END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- Claims
-- ---------------------------------------------------------------------------

-- _claim_scope: what a claim in mode p_mode may take besides the rows pinned
-- to its node, the one place of the mode rule: all_rows, unrestricted rows
-- of any owner, in 'single' mode and in 'leader' mode while p_leader (and,
-- when the leader names its term p_term, while the lease row still says it
-- holds that term: _holds_lease, so a leader naming a term it no longer
-- holds takes pinned rows only); own_rows, its node's own unrestricted rows,
-- in 'multi-node' mode. An unknown mode: PR021.
CREATE FUNCTION pgrelay._claim_scope(p_mode text, p_leader bool, p_term bigint,
                                     OUT all_rows bool, OUT own_rows bool)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF p_mode IS NULL OR p_mode NOT IN ('single', 'multi-node', 'leader') THEN
    RAISE EXCEPTION 'pgrelay: unknown mode %', COALESCE(pg_catalog.quote_literal(p_mode), 'NULL') USING ERRCODE = 'PR021';
  END IF;
  all_rows := p_mode = 'single'
              OR (p_mode = 'leader' AND COALESCE(p_leader, false)
                  AND (p_term IS NULL OR pgrelay._holds_lease(p_term, now())));
  own_rows := p_mode = 'multi-node';
END
$$;

-- _may_take: whether node p_node may take a row pinned to p_run_in_node
-- (NULL: unrestricted) and owned by p_owner_node, given its _claim_scope
-- (p_all, p_own): a row pinned to it always; an unrestricted row of any
-- owner with p_all; one it owns with p_own. The one statement of the rule,
-- in every claim's query (and in a lane's in-flight check).
--
-- LANGUAGE sql without a SET clause, so that the planner inlines it into
-- each query as if written out: a filter beside the index conditions, never
-- a function call per row (the EXPLAIN tests check the plans). A SET
-- search_path would forbid inlining, and none is needed: the body is an SQL
-- standard one (RETURN), bound to pg_catalog's operators when the migration
-- created it under pgrelay's search_path, and inlined it runs in its caller,
-- whose search_path is pinned.
CREATE FUNCTION pgrelay._may_take(p_run_in_node int, p_owner_node int, p_node int, p_all bool, p_own bool)
RETURNS bool
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_run_in_node = p_node OR (p_run_in_node IS NULL AND (p_all OR (p_own AND p_owner_node = p_node)));

-- _lane_head: the head of lane p_lane of channel p_channel for node p_node
-- with its _claim_scope (p_all, p_own): the lane's oldest notification
-- (lowest origin_id, then id) among the rows the node may take, and nothing
-- while one of those is in flight. The classic claim (_claim) and the lane
-- batch (_claim_lanes_direct) lock it FOR UPDATE SKIP LOCKED and take it
-- only if it is ready, never the lane's second row.
--
-- Inlined into the caller's query as _may_take is (LANGUAGE sql, STABLE, no
-- SET clause, an SQL standard body bound when created): the planner reads
-- queue_lane in order and stops at the head, as the EXPLAIN tests check.
CREATE FUNCTION pgrelay._lane_head(p_channel text, p_lane bigint, p_node int, p_all bool, p_own bool)
RETURNS TABLE (id bigint)
LANGUAGE sql STABLE ROWS 1
BEGIN ATOMIC
  SELECT q.id
    FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.lane = p_lane AND q.dispatched_at IS NULL
     AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
     AND NOT EXISTS (
       SELECT FROM pgrelay.queue f
        WHERE f.channel = p_channel AND f.lane = p_lane AND f.dispatched_at IS NOT NULL
          AND pgrelay._may_take(f.run_in_node, f.owner_node, p_node, p_all, p_own))
   ORDER BY q.origin_id, q.id
   LIMIT 1;
END;

-- _claim: claims up to p_limit ready rows for Processor p_processor: each
-- claimed row is marked dispatched (dispatched_at, dispatched_by) in this
-- transaction, and completed later by _complete().
--
-- Which rows a Processor may take (its partition) depends on its mode: rows
-- pinned to its node always; unrestricted rows of any owner in 'single' mode
-- and in 'leader' mode while it holds the lease (fenced by p_term: a leader
-- naming a term it no longer holds takes pinned rows only); only its node's
-- own unrestricted rows in 'multi-node' mode. An unknown mode: PR021.
--
-- Channels are visited in random order and each gets a fair share of the
-- limit, so a backlog in one channel never starves another. Only channels of
-- the kinds the Processor can run (p_kinds) are visited: a Processor without
-- an SMTP target leaves email channels pending, it does not burn their
-- attempts. With p_direct the sql channels are left to direct batches.
--
-- Serialised channels ('channel' and 'payload' modes) are claimed lane by
-- lane: a lane's head, its oldest notification, is taken only if nothing of
-- the lane is in flight and it is ready, and it is locked FOR UPDATE SKIP
-- LOCKED before it is taken. A head that another transaction holds (a
-- claimer, or a producer whose notify it absorbed), has in flight or has
-- deleted is passed over with its lane. Never the lane's second row: a plain
-- FOR UPDATE SKIP LOCKED over the lane's rows would let a second claimer skip
-- the head the first one holds and take the next row at once. That keeps a
-- lane to one event at a time without any lock of its own.
--
-- Rows past their expires_at are claimed too and flagged: the Processor
-- records them as expired without running them (expiry is checked at
-- dispatch time).
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
             AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
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

-- Direct batches of sql channels. A Processor runs the events of sql
-- channels in batches, each batch in one transaction that claims its rows by
-- locking them (FOR UPDATE SKIP LOCKED), runs every handler under its own
-- savepoint and completes the events (_complete with p_processor NULL): no
-- claim is written, the row locks are the claim. A Processor that dies
-- mid-batch leaves nothing to rescue: its transaction rolls back and the rows
-- are pending again, with no attempt counted. One commit covers the batch,
-- not a claim, a handler transaction and a completion for each event.

-- _claim_direct: locks up to p_limit ready rows of the 'none' sql channel
-- p_channel for the caller's transaction, oldest first, and returns them with
-- the channel's settings. Nothing when the channel is paused, gone, or not a
-- 'none' sql channel. p_mode, p_leader and p_term as for _claim: in leader
-- mode a leader naming a term it does not hold gets pinned rows only.
CREATE FUNCTION pgrelay._claim_direct(p_channel text, p_mode text, p_leader bool, p_term bigint, p_limit int)
RETURNS TABLE (id bigint, origin_id bigint, payload text, attempt int, enqueued_at timestamptz,
               expired bool, handler text, timeout_ms bigint, max_attempts int)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool;
  v_own bool;
  ch pgrelay.channels;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  SELECT * INTO ch FROM pgrelay.channels c
   WHERE c.channel = p_channel AND c.kind = 'sql' AND c.concurrency_mode = 'none' AND NOT c.paused;
  IF NOT FOUND OR p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT q.id, q.origin_id, q.payload, q.attempt, q.enqueued_at, COALESCE(q.expires_at <= now(), false),
         ch.handler, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint, ch.max_attempts
    FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
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
  v_all bool;
  v_own bool;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, NULL) s;
  -- A lateral LIMIT 1 in queue_ready's order per channel: the planner would
  -- otherwise answer the EXISTS with a hash of the whole queue.
  RETURN QUERY
  SELECT c.channel FROM pgrelay.channels c
   CROSS JOIN LATERAL (
     SELECT 1 FROM pgrelay.queue q
      WHERE q.channel = c.channel AND q.dispatched_at IS NULL AND q.not_before <= now()
        AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
      ORDER BY q.not_before, q.id
      LIMIT 1) r
   WHERE c.kind = 'sql' AND c.concurrency_mode = 'none' AND NOT c.paused;
  -- Any ready lane row will do: a hint, checked by the lane batch itself.
  RETURN QUERY
  SELECT ''::text FROM pgrelay.queue q
   WHERE q.dispatched_at IS NULL AND q.lane IS NOT NULL AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
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
-- p_after_lane) and wrapping around (NULL: from the start). Each head is
-- locked FOR UPDATE SKIP LOCKED, so no other batch or claim serves the lane
-- until the transaction ends. A lane whose head is not ready (a retry in its
-- backoff), whose event is in flight under a claim, or whose head another
-- transaction holds is passed over, never its second row (as in _claim).
-- Node rules and leader fencing as for _claim. Returns each row with its
-- channel's settings and its lane, so the caller can go on from the last
-- one.
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
               OR ch.concurrency_mode NOT IN ('channel', 'payload');
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
  IF p_mode = 'leader' AND p_term IS NOT NULL
     AND NOT pgrelay._holds_lease(p_term, pg_catalog.clock_timestamp()) THEN
    RAISE EXCEPTION 'pgrelay: the leader lease of term % ended while the batch ran', p_term
      USING ERRCODE = 'PR031';
  END IF;
END
$$;

-- ---------------------------------------------------------------------------
-- Completion
-- ---------------------------------------------------------------------------

-- _backoff: retry_delay * 2^(attempt-1), capped at max(retry_delay, 1 hour),
-- with +-20% jitter so retries of a burst of failures spread out.
CREATE FUNCTION pgrelay._backoff(p_retry_delay interval, p_attempt int) RETURNS interval
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT LEAST(p_retry_delay * pg_catalog.power(2, LEAST(GREATEST(p_attempt, 1) - 1, 20)),
               GREATEST(p_retry_delay, interval '1 hour'))
         * (0.8 + 0.4 * pg_catalog.random())
$$;

-- _complete: applies a batch of outcomes of Processor p_processor's claims.
-- p_events: 'succeeded', 'failed' (retried after _backoff, or 'gave_up' at
-- max_attempts), 'expired', or 'release' (claimed but never started: back to
-- pending). An outcome applies only while the claim is still the one it was
-- made for (same processor and claim time): a claim that was rescued
-- meanwhile is left alone. With p_processor NULL it completes the rows a
-- direct batch holds locked in the caller's transaction (unclaimed rows;
-- p_claimed_at is ignored). Log rows take their ids from one _next_ids call.
-- Returns the number of outcomes applied.
CREATE FUNCTION pgrelay._complete(p_processor bigint, p_ids bigint[], p_claimed_at timestamptz[],
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
  -- Only when there is something to release: the planner, which expects one
  -- row of the processor's in flight, would join every one of them (often
  -- ~1000) with the whole batch.
  v_released := 0;
  IF 'release' = ANY (p_events) THEN
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
  END IF;

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

-- _succeed: completes one claim as succeeded inside a sql handler's
-- transaction, or raises PR030 when the claim was taken back meanwhile (the
-- transaction then rolls back the handler's effects with it). Raising rather
-- than returning 0 lets the Processor send the handler, the completion and the
-- COMMIT in one round trip: a raised error turns the COMMIT into a ROLLBACK.
CREATE FUNCTION pgrelay._succeed(p_processor bigint, p_id bigint, p_claimed_at timestamptz)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF pgrelay._complete(p_processor, ARRAY[p_id], ARRAY[p_claimed_at], ARRAY['succeeded'],
                       ARRAY[NULL::text]) = 0 THEN
    RAISE EXCEPTION 'pgrelay: the claim of event % was taken back before it completed', p_id
      USING ERRCODE = 'PR030';
  END IF;
END
$$;

-- ---------------------------------------------------------------------------
-- Processors, nodes, the leader lease, rescue and adoption
-- ---------------------------------------------------------------------------

-- One row per node: heartbeat of the node's Processors, their mode. The row
-- with node_id = -1 is the leader lease of --mode leader: leader_node holds it
-- until lease_until; term grows by one at every take and fences a former
-- leader's claims. A single row, so that two nodes taking it at once converge
-- (under multi-master replication the later update wins on both nodes).
-- decommissioned_at is set by decommission() and cleared by the heartbeat of
-- a Processor that runs under the id again: a decommissioned node counts as
-- dead whatever its last heartbeat, so its unrestricted rows, including those
-- that reach this node later through replication, are adopted.
CREATE TABLE pgrelay.nodes (
  node_id           int PRIMARY KEY,
  last_seen         timestamptz NOT NULL DEFAULT now(),
  mode              text NOT NULL,
  hostname          text NULL,
  version           text NULL,
  started_at        timestamptz NOT NULL DEFAULT now(),
  leader_node       int NULL,
  term              bigint NULL,
  lease_until       timestamptz NULL,
  taken_at          timestamptz NULL,
  adopted_at        timestamptz NULL,
  decommissioned_at timestamptz NULL,
  CONSTRAINT nodes_id CHECK (node_id BETWEEN -1 AND 1023)
);

-- One row per running Processor instance. Claims name the instance
-- (queue.dispatched_by), so a dead instance's claims can be taken back while
-- other instances of the same node keep running.
CREATE TABLE pgrelay.processors (
  processor_id bigint PRIMARY KEY,
  node_id      int NOT NULL,
  mode         text NOT NULL,
  hostname     text NULL,
  pid          int NULL,
  version      text NULL,
  started_at   timestamptz NOT NULL DEFAULT now(),
  last_seen    timestamptz NOT NULL DEFAULT now()
);

-- _holds_lease: whether this node holds the leader lease of term p_term at
-- p_at (the lease runs past it): the one place of leader mode's fencing
-- rule. The claims ask at now() (_claim_scope), a direct batch just before
-- it records its outcomes at clock_timestamp() (_batch_fence),
-- _lease_release with the lease row locked.
CREATE FUNCTION pgrelay._holds_lease(p_term bigint, p_at timestamptz) RETURNS bool
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT EXISTS (SELECT FROM pgrelay.nodes l
                  WHERE l.node_id = -1 AND l.leader_node = pgrelay._this_node() AND l.term = p_term
                    AND l.lease_until > p_at)
$$;

-- _processor_start: registers a Processor instance and its node. A node that
-- runs again under a decommissioned id is a node again (its tombstone is
-- cleared).
CREATE FUNCTION pgrelay._processor_start(p_mode text, p_hostname text, p_pid int, p_version text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_id bigint := pgrelay._next_id();
  v_node int := pgrelay._this_node();
BEGIN
  INSERT INTO pgrelay.processors (processor_id, node_id, mode, hostname, pid, version)
  VALUES (v_id, v_node, p_mode, p_hostname, p_pid, p_version);
  INSERT INTO pgrelay.nodes (node_id, mode, hostname, version)
  VALUES (v_node, p_mode, p_hostname, p_version)
  ON CONFLICT (node_id) DO UPDATE
    SET last_seen = now(), mode = EXCLUDED.mode, hostname = EXCLUDED.hostname,
        version = EXCLUDED.version, decommissioned_at = NULL;
  RETURN v_id;
END
$$;

-- _heartbeat: marks a Processor instance and its node alive (and clears a
-- tombstone, as _processor_start). Returns false when the instance's row was
-- gone (it was presumed dead and its claims were taken back); the row is
-- then recreated.
CREATE FUNCTION pgrelay._heartbeat(p_processor bigint, p_mode text, p_hostname text, p_pid int,
                                              p_version text)
RETURNS bool
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_alive bool;
BEGIN
  UPDATE pgrelay.processors p SET last_seen = now() WHERE p.processor_id = p_processor;
  v_alive := FOUND;
  IF NOT v_alive THEN
    INSERT INTO pgrelay.processors (processor_id, node_id, mode, hostname, pid, version)
    VALUES (p_processor, v_node, p_mode, p_hostname, p_pid, p_version);
  END IF;
  INSERT INTO pgrelay.nodes (node_id, mode, hostname, version)
  VALUES (v_node, p_mode, p_hostname, p_version)
  ON CONFLICT (node_id) DO UPDATE
    SET last_seen = now(), mode = EXCLUDED.mode, hostname = EXCLUDED.hostname,
        version = EXCLUDED.version, decommissioned_at = NULL;
  RETURN v_alive;
END
$$;

-- _processor_stop: a clean stop: releases whatever the instance still holds and
-- removes its row.
CREATE FUNCTION pgrelay._processor_stop(p_processor bigint) RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n int;
BEGIN
  UPDATE pgrelay.queue q SET dispatched_at = NULL, dispatched_by = NULL
   WHERE q.dispatched_by = p_processor AND q.dispatched_at IS NOT NULL;
  GET DIAGNOSTICS n = ROW_COUNT;
  DELETE FROM pgrelay.processors p WHERE p.processor_id = p_processor;
  RETURN n;
END
$$;

-- _rescue: takes back claims that will never complete: those of this node's
-- Processor instances that stopped heartbeating for p_dead_after, and those
-- held past their channel's timeout plus p_lease_grace (a live but stuck
-- instance, or an instance whose row is gone). A row pinned to another node
-- is left alone: only its node, or a decommission, ever changes it. A
-- taken-back claim counts as an attempt, as a crash or hang of the Processor
-- while the handler ran may be the event's own doing: the row goes back to
-- pending with attempt + 1 and a 'rescued' log row, or, when that was its
-- last attempt, ends 'gave_up'. So an event that kills its Processor cannot
-- loop forever.
--
-- The Processor never sees a given-up event again, so for an email channel
-- nothing else would move its notification out of 'sending': it is failed
-- here, in the same transaction as the 'gave_up' row, through
-- pgrelay_notifier.fail_for_event (executable by pgrelay_processor), as the
-- email handler would: only if this event may send it (the send gate), never
-- a notification another event holds or sent, nor another channel's.
CREATE FUNCTION pgrelay._rescue(p_processor bigint, p_dead_after interval, p_lease_grace interval)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_dead bigint[];
  n int;
  v_emails bigint[];
  v_whys text[];
  v_channels text[];
  v_events bigint[];
BEGIN
  WITH dead AS (
    DELETE FROM pgrelay.processors p
     WHERE p.node_id = v_node AND p.processor_id <> p_processor
       AND p.last_seen < now() - p_dead_after
    RETURNING p.processor_id
  )
  SELECT COALESCE(pg_catalog.array_agg(dead.processor_id), '{}') INTO v_dead FROM dead;

  -- The holder is read before the update (RETURNING would see it cleared).
  -- A row pinned to another node is that node's, whoever holds it: only
  -- that node (or a decommission) changes it.
  WITH held AS (
    SELECT q.id, q.origin_id, q.channel, q.attempt, COALESCE(c.max_attempts, 0) AS max_attempts,
           CASE WHEN q.dispatched_by = ANY (v_dead)
                THEN pg_catalog.format('processor %s stopped heartbeating while running attempt %s',
                                       q.dispatched_by, q.attempt)
                ELSE pg_catalog.format('claim lease expired: processor %s held attempt %s past the channel timeout plus %s',
                                       q.dispatched_by, q.attempt, p_lease_grace)
           END AS why
      FROM pgrelay.queue q
      LEFT JOIN pgrelay.channels c ON c.channel = q.channel
     WHERE q.dispatched_at IS NOT NULL
       AND (q.run_in_node IS NULL OR q.run_in_node = v_node)
       AND (q.dispatched_by = ANY (v_dead)
            OR (q.dispatched_at < now() - COALESCE(c.timeout, interval '0') - p_lease_grace
                AND (EXISTS (SELECT FROM pgrelay.processors p
                              WHERE p.processor_id = q.dispatched_by AND p.node_id = v_node)
                     OR NOT EXISTS (SELECT FROM pgrelay.processors p
                                     WHERE p.processor_id = q.dispatched_by))))
     FOR UPDATE OF q SKIP LOCKED
  ), back AS (
    UPDATE pgrelay.queue q
       SET dispatched_at = NULL, dispatched_by = NULL, attempt = q.attempt + 1
      FROM held
     WHERE q.id = held.id AND held.attempt < held.max_attempts
    RETURNING q.id
  ), gone AS (
    DELETE FROM pgrelay.queue q
     USING held
     WHERE q.id = held.id AND held.attempt >= held.max_attempts
    RETURNING q.id, q.channel, q.payload
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node)
    SELECT held.id, held.origin_id, held.channel, held.attempt,
           CASE WHEN held.attempt < held.max_attempts THEN 'rescued' ELSE 'gave_up' END,
           CASE WHEN held.attempt < held.max_attempts THEN held.why
                ELSE held.why || ' (its last attempt)' END,
           v_node
      FROM held
     WHERE held.id IN (SELECT back.id FROM back UNION ALL SELECT gone.id FROM gone)
     ORDER BY held.id
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM lg), e.ids, e.whys, e.channels, e.events
    INTO n, v_emails, v_whys, v_channels, v_events
    FROM (SELECT pg_catalog.array_agg(gone.payload::bigint ORDER BY gone.id) AS ids,
                 pg_catalog.array_agg(held.why ORDER BY gone.id) AS whys,
                 pg_catalog.array_agg(gone.channel ORDER BY gone.id) AS channels,
                 pg_catalog.array_agg(held.origin_id ORDER BY gone.id) AS events
            FROM gone
            JOIN held ON held.id = gone.id
            JOIN pgrelay.channels c ON c.channel = gone.channel AND c.kind = 'email'
           WHERE gone.payload ~ '^[0-9]{1,18}$') e;
  -- Only a notification this event may send: not one another event holds,
  -- nor another channel's (fail_for_event, the send gate's rule).
  FOR i IN 1 .. COALESCE(pg_catalog.cardinality(v_emails), 0) LOOP
    PERFORM pgrelay_notifier.fail_for_event(v_emails[i], v_channels[i], v_events[i],
      'gave up: ' || v_whys[i] || ' (its last attempt)');
  END LOOP;
  RETURN n;
END
$$;

-- _lease: one step of the leader election of --mode leader, run on every
-- heartbeat. The holder renews its lease; anyone takes a lease that is free or
-- has run out (term + 1). Returns the lease as this node now sees it; taken is
-- true when this call took it. A node that took the lease must not act as the
-- leader before it has waited longer than the replication lag and seen the
-- lease still its own, with the same term (a take on another node at the same
-- moment wins by last update, on both nodes).
CREATE FUNCTION pgrelay._lease(p_duration interval)
RETURNS TABLE (leader_node int, term bigint, lease_until timestamptz, mine bool, taken bool)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  l pgrelay.nodes;
BEGIN
  INSERT INTO pgrelay.nodes (node_id, mode, last_seen) VALUES (-1, 'lease', now())
  ON CONFLICT (node_id) DO NOTHING;
  SELECT * INTO l FROM pgrelay.nodes n WHERE n.node_id = -1 FOR UPDATE;
  taken := false;
  IF l.leader_node = v_node AND l.lease_until > now() THEN
    UPDATE pgrelay.nodes n SET lease_until = now() + p_duration, last_seen = now()
     WHERE n.node_id = -1 RETURNING * INTO l;
  ELSIF l.lease_until IS NULL OR l.lease_until <= now() THEN
    UPDATE pgrelay.nodes n
       SET leader_node = v_node, term = COALESCE(n.term, 0) + 1, lease_until = now() + p_duration,
           taken_at = now(), last_seen = now()
     WHERE n.node_id = -1 RETURNING * INTO l;
    taken := true;
  END IF;
  leader_node := l.leader_node;
  term := l.term;
  lease_until := l.lease_until;
  mine := l.leader_node = v_node AND l.lease_until > now();
  RETURN NEXT;
END
$$;

-- _lease_release: a leader stopping cleanly gives the lease up at once, so
-- another node can take over without waiting for it to run out. The lease
-- row is locked first and then checked, so a take that committed meanwhile
-- is seen (and left alone).
CREATE FUNCTION pgrelay._lease_release(p_term bigint) RETURNS bool
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM FROM pgrelay.nodes n WHERE n.node_id = -1 FOR UPDATE;
  IF NOT pgrelay._holds_lease(p_term, now()) THEN
    RETURN false;
  END IF;
  UPDATE pgrelay.nodes n SET lease_until = now() WHERE n.node_id = -1;
  RETURN true;
END
$$;

-- _adopt_rows: node p_adopter takes over the unrestricted work of node
-- p_dead: the rows p_dead owns (owner_node becomes p_adopter) and those its
-- Processors (p_procs) had claimed (back to pending). Each gets an
-- 'adopted' log row, written as this node, whose error is p_why followed by
-- who adopted. Rows pinned to a node are never touched. The one place both
-- _adopt and decommission hand work over.
CREATE FUNCTION pgrelay._adopt_rows(p_dead int, p_adopter int, p_procs bigint[], p_why text)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n int;
BEGIN
  WITH t AS (
    SELECT q.id, q.origin_id, q.channel, q.attempt, q.dispatched_at IS NOT NULL AS was_claimed
      FROM pgrelay.queue q
     WHERE q.run_in_node IS NULL
       AND (q.owner_node = p_dead OR (q.dispatched_at IS NOT NULL AND q.dispatched_by = ANY (p_procs)))
     FOR UPDATE OF q SKIP LOCKED
  ), u AS (
    UPDATE pgrelay.queue q
       SET owner_node = CASE WHEN q.owner_node = p_dead THEN p_adopter ELSE q.owner_node END,
           dispatched_at = CASE WHEN q.dispatched_by = ANY (p_procs) THEN NULL ELSE q.dispatched_at END,
           dispatched_by = CASE WHEN q.dispatched_by = ANY (p_procs) THEN NULL ELSE q.dispatched_by END
      FROM t
     WHERE q.id = t.id
    RETURNING q.id
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error)
    SELECT t.id, t.origin_id, t.channel, t.attempt, 'adopted',
           pg_catalog.format('%s; adopted by node %s%s', p_why, p_adopter,
                             CASE WHEN t.was_claimed THEN ' (its claim was taken back)' ELSE '' END)
      FROM t WHERE t.id IN (SELECT u.id FROM u)
     ORDER BY t.id
    RETURNING 1
  )
  SELECT count(*) INTO n FROM lg;
  RETURN n;
END
$$;

-- _adopt: the unrestricted work of dead nodes (no heartbeat for p_dead_after,
-- or decommissioned) is taken over by exactly one live node: the live node
-- with the smallest id, a choice every node makes the same from the same
-- replicated nodes table. Rows pinned to the dead node are never adopted:
-- they wait for it, or for pgrelay.decommission(). A dead node is looked at
-- again at most every p_dead_after, for rows that reached this node late
-- through replication — a decommissioned node too, for as long as its
-- tombstone stays.
CREATE FUNCTION pgrelay._adopt(p_dead_after interval) RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  d pgrelay.nodes;
  v_adopter int;
  v_procs bigint[];
  n int := 0;
BEGIN
  SELECT min(x.node_id) INTO v_adopter FROM pgrelay.nodes x
   WHERE x.node_id >= 0 AND x.last_seen >= now() - p_dead_after AND x.mode <> 'single'
     AND x.decommissioned_at IS NULL;
  IF v_adopter IS DISTINCT FROM v_node THEN
    RETURN 0;
  END IF;
  FOR d IN
    SELECT * FROM pgrelay.nodes x
     WHERE x.node_id >= 0 AND x.node_id <> v_node
       AND (x.last_seen < now() - p_dead_after OR x.decommissioned_at IS NOT NULL)
       AND x.mode <> 'single'
       AND (x.adopted_at IS NULL OR x.adopted_at < now() - p_dead_after)
     ORDER BY x.node_id
     FOR UPDATE SKIP LOCKED
  LOOP
    SELECT COALESCE(pg_catalog.array_agg(p.processor_id), '{}') INTO v_procs
      FROM pgrelay.processors p WHERE p.node_id = d.node_id;
    n := n + pgrelay._adopt_rows(d.node_id, v_node, v_procs,
      CASE WHEN d.decommissioned_at IS NOT NULL
           THEN pg_catalog.format('node %s was decommissioned', d.node_id)
           ELSE pg_catalog.format('node %s is dead (no heartbeat for %s)', d.node_id, p_dead_after) END);
    DELETE FROM pgrelay.processors p WHERE p.node_id = d.node_id;
    UPDATE pgrelay.nodes x SET adopted_at = now() WHERE x.node_id = d.node_id;
  END LOOP;
  RETURN n;
END
$$;

-- decommission: node p_node is gone for good. Refuses a node that
-- heartbeated within p_dead_after (PR022), and a p_dead_after that is NULL,
-- zero or negative (PR023: with it every node would count as silent long
-- enough, and a live node's pinned rows would be discarded while its
-- Processors ran). Then, in one transaction:
-- * its pinned rows (node-restricted channels), pending or held by its dead
--   Processors, can never run anywhere else: they are discarded, each logged
--   'gave_up' with the reason (an email's notification ends 'failed', as in
--   _rescue);
-- * its unrestricted rows go to the live node that adopts (the live node with
--   the smallest id, as _adopt picks it), logged 'adopted'; with no live node
--   yet, the first one to adopt takes them;
-- * its processor rows are removed, and its node row stays as a tombstone
--   (decommissioned_at), so that rows of the node that arrive later through
--   replication are adopted too.
-- Returns the number of pinned rows discarded. Run on any node: the changes
-- replicate.
CREATE FUNCTION pgrelay.decommission(p_node int, p_dead_after interval DEFAULT '1 minute')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_seen timestamptz;
  v_adopter int;
  v_procs bigint[];
  v_why text := pg_catalog.format('node %s was decommissioned', p_node);
  v_emails bigint[];
  v_errors text[];
  n bigint;
  v_channels text[];
  v_events bigint[];
BEGIN
  IF p_node IS NULL OR p_node < 0 OR p_node > 1023 THEN
    RAISE EXCEPTION 'pgrelay.decommission: node id % is outside 0..1023', p_node USING ERRCODE = 'PR020';
  END IF;
  IF p_dead_after IS NULL OR p_dead_after <= interval '0' THEN
    RAISE EXCEPTION 'pgrelay.decommission: p_dead_after must be positive, got %',
      COALESCE(p_dead_after::text, 'NULL') USING ERRCODE = 'PR023',
      HINT = 'It is how long the node must have been silent; with zero or less a live node would count as dead.';
  END IF;
  SELECT x.last_seen INTO v_seen FROM pgrelay.nodes x
   WHERE x.node_id = p_node AND x.decommissioned_at IS NULL;
  IF v_seen >= now() - p_dead_after THEN
    RAISE EXCEPTION 'pgrelay.decommission: node % heartbeated % ago; stop its Processors first',
      p_node, now() - v_seen USING ERRCODE = 'PR022',
      HINT = 'A node is decommissioned only once it has been silent for p_dead_after.';
  END IF;
  WITH d AS (
    DELETE FROM pgrelay.queue q
     WHERE q.run_in_node = p_node
    RETURNING q.id, q.origin_id, q.channel, q.attempt, q.payload,
              pg_catalog.format('%s: a row pinned to it can never run%s', v_why,
                                CASE WHEN q.dispatched_at IS NOT NULL
                                     THEN pg_catalog.format(' (its processor %s held attempt %s)',
                                                            q.dispatched_by, q.attempt)
                                     ELSE '' END) AS why
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error)
    SELECT d.id, d.origin_id, d.channel, d.attempt, 'gave_up', d.why
      FROM d ORDER BY d.id
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM lg), e.ids, e.errors, e.channels, e.events
    INTO n, v_emails, v_errors, v_channels, v_events
    FROM (SELECT pg_catalog.array_agg(d.payload::bigint ORDER BY d.id) AS ids,
                 pg_catalog.array_agg(d.why ORDER BY d.id) AS errors,
                 pg_catalog.array_agg(d.channel ORDER BY d.id) AS channels,
                 pg_catalog.array_agg(d.origin_id ORDER BY d.id) AS events
            FROM d
            JOIN pgrelay.channels c ON c.channel = d.channel AND c.kind = 'email'
           WHERE d.payload ~ '^[0-9]{1,18}$') e;
  -- A discarded email event never reaches the email handler: its
  -- notification ends 'failed' here, if this event may send it (not one
  -- another event holds or sent, nor another channel's: fail_for_event).
  FOR i IN 1 .. COALESCE(pg_catalog.cardinality(v_emails), 0) LOOP
    PERFORM pgrelay_notifier.fail_for_event(v_emails[i], v_channels[i], v_events[i], 'gave up: ' || v_errors[i]);
  END LOOP;

  SELECT min(x.node_id) INTO v_adopter FROM pgrelay.nodes x
   WHERE x.node_id >= 0 AND x.node_id <> p_node AND x.last_seen >= now() - p_dead_after
     AND x.mode <> 'single' AND x.decommissioned_at IS NULL;
  IF v_adopter IS NOT NULL THEN
    SELECT COALESCE(pg_catalog.array_agg(p.processor_id), '{}') INTO v_procs
      FROM pgrelay.processors p WHERE p.node_id = p_node;
    PERFORM pgrelay._adopt_rows(p_node, v_adopter, v_procs, v_why);
  END IF;
  DELETE FROM pgrelay.processors p WHERE p.node_id = p_node;
  -- The tombstone. A node that never heartbeated gets one too: rows
  -- enqueued there are adopted all the same.
  INSERT INTO pgrelay.nodes AS x (node_id, mode, decommissioned_at, adopted_at)
  VALUES (p_node, 'decommissioned', now(), CASE WHEN v_adopter IS NOT NULL THEN now() END)
  ON CONFLICT (node_id) DO UPDATE
    SET decommissioned_at = now(),
        adopted_at = CASE WHEN v_adopter IS NOT NULL THEN now() ELSE x.adopted_at END;
  RETURN n;
END
$$;

-- nodes_overview: what `pgrelay nodes` shows, one row per node; a
-- decommissioned node is never alive. Runs as its caller: every role allowed
-- to call it may read what it reads.
CREATE FUNCTION pgrelay.nodes_overview(p_dead_after interval DEFAULT '10 seconds')
RETURNS TABLE (node_id int, mode text, last_seen timestamptz, alive bool, leader bool,
               processors bigint, pending bigint, pinned bigint, hostname text, version text,
               decommissioned_at timestamptz)
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
  WITH l AS (SELECT x.leader_node, x.lease_until FROM pgrelay.nodes x WHERE x.node_id = -1),
  q AS (
    SELECT COALESCE(q.run_in_node, q.owner_node) AS node,
           count(*) FILTER (WHERE q.run_in_node IS NULL) AS pending,
           count(*) FILTER (WHERE q.run_in_node IS NOT NULL) AS pinned
      FROM pgrelay.queue q WHERE q.dispatched_at IS NULL
     GROUP BY 1
  )
  SELECT n.node_id, n.mode, n.last_seen,
         n.last_seen >= now() - p_dead_after AND n.decommissioned_at IS NULL,
         COALESCE((SELECT l.leader_node = n.node_id AND l.lease_until > now() FROM l), false),
         (SELECT count(*) FROM pgrelay.processors p WHERE p.node_id = n.node_id),
         COALESCE(q.pending, 0), COALESCE(q.pinned, 0), n.hostname, n.version, n.decommissioned_at
    FROM pgrelay.nodes n LEFT JOIN q ON q.node = n.node_id
   WHERE n.node_id >= 0
   ORDER BY n.node_id
$$;

-- ---------------------------------------------------------------------------
-- The log and retention
-- ---------------------------------------------------------------------------

-- Append-only: one row per state change. The event store.
CREATE TABLE pgrelay.log (
  id        bigint PRIMARY KEY DEFAULT pgrelay._next_id(),
  queue_id  bigint NOT NULL,
  origin_id bigint NOT NULL,
  channel   text NOT NULL,
  attempt   int NOT NULL,
  event     text NOT NULL,
  error     text NULL,
  node      int NOT NULL DEFAULT pgrelay._this_node(),
  at        timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT log_event CHECK (event IN ('succeeded', 'failed', 'gave_up', 'expired',
                                        'deduplicated', 'adopted', 'rescued'))
);
CREATE INDEX log_origin ON pgrelay.log (origin_id);
-- The publisher reads one node's rows past its cursor in id order, the
-- backlog counts them, and retention trims each node's oldest.
CREATE INDEX log_node_id ON pgrelay.log (node, id);

-- One row per batch of log rows that retention deleted before the NATS
-- publisher of their node had published them (past the cap): whose rows
-- (node), how many, their id and time ranges, and which node's janitor
-- deleted them when. Written by _trim_log in the transaction that deletes the
-- rows. Nothing trims it: delete what you have looked at.
CREATE TABLE pgrelay.log_dropped (
  id         bigint PRIMARY KEY DEFAULT pgrelay._next_id(),
  node       int NOT NULL,
  rows       bigint NOT NULL,
  first_id   bigint NOT NULL,
  last_id    bigint NOT NULL,
  first_at   timestamptz NOT NULL,
  last_at    timestamptz NOT NULL,
  dropped_at timestamptz NOT NULL DEFAULT now(),
  dropped_by int NOT NULL DEFAULT pgrelay._this_node()
);

-- _trim_log: deletes up to p_batch log rows older than p_older_than, oldest
-- first per node, by the (node, id) index (ids carry their creation time).
-- Retention keeps what the NATS publisher has not published: a node with a
-- log publish cursor has a publisher, and its rows past the cursor are kept,
-- unless older than p_unpublished_max (at least p_older_than; NULL: kept for
-- as long as it takes). Those are deleted all the same, recorded in
-- pgrelay.log_dropped, and returned in dropped (of deleted) with the
-- smallest and largest id.
CREATE FUNCTION pgrelay._trim_log(p_older_than interval, p_batch int, p_unpublished_max interval DEFAULT NULL)
RETURNS TABLE (deleted int, dropped int, dropped_first bigint, dropped_last bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_floor bigint := pgrelay._id_floor(now() - p_older_than);
  v_cap bigint;
  v_node int;
  v_cur bigint;
  v_upto bigint;
  v_left int := p_batch;
  n int;
  r record;
BEGIN
  deleted := 0;
  dropped := 0;
  IF p_unpublished_max IS NOT NULL THEN
    v_cap := LEAST(v_floor, pgrelay._id_floor(now() - p_unpublished_max));
  END IF;
  -- The nodes that wrote log rows: a loose scan of the (node, id) index.
  FOR v_node IN
    WITH RECURSIVE ns AS (
      SELECT (SELECT min(l.node) FROM pgrelay.log l) AS node
      UNION ALL
      SELECT (SELECT min(l.node) FROM pgrelay.log l WHERE l.node > ns.node) FROM ns WHERE ns.node IS NOT NULL
    )
    SELECT ns.node FROM ns WHERE ns.node IS NOT NULL
  LOOP
    EXIT WHEN v_left <= 0;
    v_cur := NULL;
    SELECT c.last_id INTO v_cur FROM pgrelay.publish_cursors c WHERE c.node_id = v_node AND c.source = 'log';
    -- Published (or no publisher) and past the retention: one index range,
    -- so that rows held back are not read again at every call.
    -- (The row comparisons keep the generic plan on log_node_id: with
    -- x.node = v_node the planner may walk the primary key instead, through
    -- every other node's rows; TestExplainTrimLogUsesNodeIndex.)
    v_upto := CASE WHEN v_cur IS NULL THEN v_floor ELSE LEAST(v_floor, v_cur + 1) END;
    DELETE FROM pgrelay.log l
     WHERE l.id = ANY (ARRAY(SELECT x.id FROM pgrelay.log x
                              WHERE (x.node, x.id) >= (v_node, 0::bigint) AND (x.node, x.id) < (v_node, v_upto)
                              ORDER BY x.node, x.id LIMIT v_left));
    GET DIAGNOSTICS n = ROW_COUNT;
    deleted := deleted + n;
    v_left := v_left - n;
    -- Unpublished and past the cap.
    IF v_cur IS NOT NULL AND v_cap IS NOT NULL AND v_left > 0 THEN
      WITH x AS (
        DELETE FROM pgrelay.log l
         WHERE l.id = ANY (ARRAY(SELECT x.id FROM pgrelay.log x
                                  WHERE (x.node, x.id) > (v_node, v_cur) AND (x.node, x.id) < (v_node, v_cap)
                                  ORDER BY x.node, x.id LIMIT v_left))
        RETURNING l.id, l.at
      )
      SELECT count(*)::int AS rows, min(x.id) AS first_id, max(x.id) AS last_id, min(x.at) AS first_at,
             max(x.at) AS last_at
        INTO r FROM x;
      IF r.rows > 0 THEN
        INSERT INTO pgrelay.log_dropped (node, rows, first_id, last_id, first_at, last_at)
        VALUES (v_node, r.rows, r.first_id, r.last_id, r.first_at, r.last_at);
        deleted := deleted + r.rows;
        dropped := dropped + r.rows;
        v_left := v_left - r.rows;
        dropped_first := LEAST(dropped_first, r.first_id);
        dropped_last := GREATEST(dropped_last, r.last_id);
      END IF;
    END IF;
  END LOOP;
  RETURN NEXT;
END
$$;

-- _trim_event_payloads: deletes up to p_batch kept payloads older than
-- p_older_than whose queue row is gone and that no publisher may still need:
-- with publishers (log publish cursors), only payloads of events up to the
-- least advanced cursor, or older than p_unpublished_max (as in _trim_log).
CREATE FUNCTION pgrelay._trim_event_payloads(p_older_than interval, p_batch int,
                                             p_unpublished_max interval DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_floor bigint := pgrelay._id_floor(now() - p_older_than);
  v_published bigint;
  n int;
BEGIN
  SELECT min(c.last_id) INTO v_published FROM pgrelay.publish_cursors c WHERE c.source = 'log';
  IF v_published IS NOT NULL THEN
    v_floor := LEAST(v_floor, GREATEST(v_published + 1,
      CASE WHEN p_unpublished_max IS NOT NULL THEN pgrelay._id_floor(now() - p_unpublished_max) END));
  END IF;
  DELETE FROM pgrelay.event_payloads e
   WHERE e.queue_id IN (SELECT x.queue_id FROM pgrelay.event_payloads x
                         WHERE x.queue_id < v_floor
                           AND NOT EXISTS (SELECT FROM pgrelay.queue q WHERE q.id = x.queue_id)
                         ORDER BY x.queue_id LIMIT p_batch);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

-- ---------------------------------------------------------------------------
-- The NATS publisher
-- ---------------------------------------------------------------------------

-- One row per (node, source): every row of the source written by that node
-- with an id up to last_id is in NATS. Sources: 'log' (pgrelay.log) and
-- 'notifier' (pgrelay_notifier.status_events). Each node has its own rows, so
-- the table replicates without conflicts on a multi-master cluster.
CREATE TABLE pgrelay.publish_cursors (
  node_id    int NOT NULL,
  source     text NOT NULL,
  last_id    bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (node_id, source),
  CONSTRAINT publish_cursors_node CHECK (node_id BETWEEN 0 AND 1023),
  CONSTRAINT publish_cursors_source CHECK (source IN ('log', 'notifier'))
);

-- One row per node whose NATS publisher is running: the session that holds
-- the lease (its pid and start time; a session that ended holds nothing).
-- Taken and checked from Go. Node-local.
CREATE TABLE pgrelay.publish_leases (
  node_id      int PRIMARY KEY,
  holder_pid   int NOT NULL,
  holder_start timestamptz NOT NULL,
  taken_at     timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT publish_leases_node CHECK (node_id BETWEEN 0 AND 1023)
);

-- _publish_horizon: an id below which no row of this database can still be
-- uncommitted. Ids are taken from the clock when a row is inserted
-- (_next_id), so a row can commit after a row with a larger id was already
-- published; a cursor moved past it would skip it for good. A transaction
-- that has written anything has a backend_xid, and every id it took carries a
-- time no earlier than its xact_start less the counter's lag behind the clock
-- (at most 100 ms); one that has not written yet will take ids from now on.
-- So rows with ids below the floor of min(now, oldest writing transaction's
-- start) - 200 ms are all committed or gone. A long writing transaction holds
-- publishing back; it never loses an event.
--
-- SECURITY DEFINER: pg_stat_activity hides other roles' transactions from an
-- unprivileged role. The owner (who ran the migration) must be a superuser or
-- a member of pg_read_all_stats; otherwise this refuses rather than guess.
CREATE FUNCTION pgrelay._publish_horizon() RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_oldest timestamptz;
BEGIN
  IF NOT pg_catalog.pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') THEN
    RAISE EXCEPTION 'pgrelay: the owner of pgrelay._publish_horizon(), %, cannot see other sessions'' transactions',
      current_user USING ERRCODE = 'PR040',
      HINT = pg_catalog.format('GRANT pg_read_all_stats TO %I;', current_user);
  END IF;
  SELECT min(COALESCE(a.xact_start, a.backend_start)) INTO v_oldest
    FROM pg_catalog.pg_stat_activity a
   WHERE a.backend_xid IS NOT NULL
     AND a.datname = pg_catalog.current_database()
     AND a.pid <> pg_catalog.pg_backend_pid();
  RETURN pgrelay._id_floor(LEAST(pg_catalog.clock_timestamp(), v_oldest) - interval '200 milliseconds');
END
$$;

-- _notifier_status_batch: the notifier source's scan (the log's is a plain
-- query on pgrelay.log). The notifier's schema is created after this one:
-- PL/pgSQL resolves the table when called, and the publisher calls this only
-- when to_regclass('pgrelay_notifier.status_events') is not NULL. SECURITY DEFINER
-- so the Processor role needs no grant on the notifier's table.
CREATE FUNCTION pgrelay._notifier_status_batch(p_node int, p_after bigint, p_before bigint, p_limit int)
RETURNS TABLE (id bigint, notification_id bigint, channel text, status text, error text, node int,
               at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN QUERY
  SELECT s.id, s.notification_id, s.channel, s.status, s.error, s.node, s.at
    FROM pgrelay_notifier.status_events s
   WHERE s.node = p_node AND s.id > p_after AND s.id < p_before
   ORDER BY s.id
   LIMIT p_limit;
END
$$;

-- publish_backlog: per publisher cursor, how many rows of its node are not
-- yet published, counted up to p_cap + 1 (a count above p_cap means "more
-- than p_cap"): cheap on any backlog, by the (node, id) index; and oldest_at,
-- the time of the oldest row not yet published (NULL when none), the
-- publisher's lag in time.
CREATE FUNCTION pgrelay.publish_backlog(p_cap int DEFAULT 100000)

RETURNS TABLE (node_id int, source text, last_id bigint, backlog bigint, updated_at timestamptz,
               oldest_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  c pgrelay.publish_cursors;
BEGIN
  FOR c IN SELECT * FROM pgrelay.publish_cursors x ORDER BY x.node_id, x.source LOOP
    node_id := c.node_id;
    source := c.source;
    last_id := c.last_id;
    updated_at := c.updated_at;
    oldest_at := NULL;
    IF c.source = 'log' THEN
      SELECT count(*) INTO backlog
        FROM (SELECT FROM pgrelay.log l WHERE l.node = c.node_id AND l.id > c.last_id
               LIMIT p_cap + 1) x;
      SELECT l.at INTO oldest_at FROM pgrelay.log l
       WHERE l.node = c.node_id AND l.id > c.last_id ORDER BY l.node, l.id LIMIT 1;
    ELSIF pg_catalog.to_regclass('pgrelay_notifier.status_events') IS NOT NULL THEN
      EXECUTE 'SELECT count(*) FROM (SELECT FROM pgrelay_notifier.status_events s
                WHERE s.node = $1 AND s.id > $2 LIMIT $3) x'
        INTO backlog USING c.node_id, c.last_id, p_cap + 1;
      EXECUTE 'SELECT s.at FROM pgrelay_notifier.status_events s
                WHERE s.node = $1 AND s.id > $2 ORDER BY s.node, s.id LIMIT 1'
        INTO oldest_at USING c.node_id, c.last_id;
    ELSE
      backlog := 0;
    END IF;
    RETURN NEXT;
  END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- Privileges
-- ---------------------------------------------------------------------------

REVOKE ALL ON SCHEMA pgrelay FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA pgrelay FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgrelay FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgrelay FROM PUBLIC;

GRANT USAGE ON SCHEMA pgrelay TO pgrelay_producer, pgrelay_processor, pgrelay_admin;

-- Producers: enqueue and ask for status, nothing else; they read the node id.
GRANT EXECUTE ON FUNCTION
  pgrelay.notify(text, text, timestamptz, interval),
  pgrelay.notify_many(text, text[], timestamptz, interval),
  pgrelay.status(bigint),
  pgrelay._this_node(), pgrelay._node_setting()
  TO pgrelay_producer;
GRANT SELECT (node_id) ON pgrelay.this_node TO pgrelay_producer;

-- Admins: manage channels and nodes, watch the queue, the log and the
-- publisher.
GRANT EXECUTE ON FUNCTION
  pgrelay.register(text, text, text, text, bool, bool, int, interval, interval, interval, bool, text),
  pgrelay.update(text, text, text, text, bool, bool, int, interval, interval, interval, bool, bool, text),
  pgrelay.unregister(text, bool),
  pgrelay.decommission(int, interval),
  pgrelay.notify(text, text, timestamptz, interval),
  pgrelay.notify_many(text, text[], timestamptz, interval),
  pgrelay.status(bigint), pgrelay.queue_stats(), pgrelay.nodes_overview(interval),
  pgrelay.publish_backlog(int),
  pgrelay._this_node(), pgrelay._node_setting(), pgrelay._record_node()
  TO pgrelay_admin;
GRANT SELECT ON pgrelay.channels, pgrelay.queue, pgrelay.log, pgrelay.nodes, pgrelay.processors,
                pgrelay.event_payloads, pgrelay.publish_cursors, pgrelay.publish_leases,
                pgrelay.log_dropped, pgrelay.schema_migrations
  TO pgrelay_admin;
GRANT SELECT (node_id) ON pgrelay.this_node TO pgrelay_admin;

-- Processors: claim, run, complete, heartbeat, rescue, adopt, trim, publish.
-- They read the node's row (ids, wake-ups of retry rows) and lock it when
-- they move the id counter (FOR UPDATE needs an UPDATE privilege: only on
-- updated_at, which nothing changes through it).
GRANT SELECT ON pgrelay.channels, pgrelay.schema_migrations TO pgrelay_processor;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgrelay.queue, pgrelay.nodes, pgrelay.processors,
                                        pgrelay.publish_leases
  TO pgrelay_processor;
GRANT SELECT, INSERT, DELETE ON pgrelay.log, pgrelay.event_payloads TO pgrelay_processor;
GRANT SELECT, INSERT ON pgrelay.log_dropped TO pgrelay_processor;
GRANT SELECT, INSERT, UPDATE ON pgrelay.publish_cursors TO pgrelay_processor;
GRANT SELECT (node_id, wake_key), UPDATE (updated_at) ON pgrelay.this_node TO pgrelay_processor;
GRANT SELECT, INSERT, UPDATE ON pgrelay.wake_slots TO pgrelay_processor;
GRANT USAGE, UPDATE ON SEQUENCE pgrelay._id_seq TO pgrelay_processor;
GRANT EXECUTE ON FUNCTION
  pgrelay._this_node(), pgrelay._node_setting(), pgrelay._record_node(),
  pgrelay._next_id(), pgrelay._next_id_at(bigint), pgrelay._next_ids(int),
  pgrelay._id_floor(timestamptz),
  pgrelay._queue_before_insert(), pgrelay._queue_wake(), pgrelay._queue_wake_replica(),
  pgrelay._wake(text), pgrelay._wake_slot(text), pgrelay._arm_wakes(),
  pgrelay._wake_xids_ended(pg_snapshot),
  pgrelay._queue_keep_payloads(),
  pgrelay._claim_scope(text, bool, bigint), pgrelay._may_take(int, int, int, bool, bool),
  pgrelay._lane_head(text, bigint, int, bool, bool),
  pgrelay._holds_lease(bigint, timestamptz),
  pgrelay._claim(bigint, text, bool, int, text[], bigint, bool),
  pgrelay._claim_direct(text, text, bool, bigint, int),
  pgrelay._claim_lanes_direct(text, bool, bigint, int, text, bigint),
  pgrelay._ready_direct(text, bool),
  pgrelay._batch_fence(text, bigint),
  pgrelay._backoff(interval, int),
  pgrelay._complete(bigint, bigint[], timestamptz[], text[], text[]),
  pgrelay._succeed(bigint, bigint, timestamptz),
  pgrelay._processor_start(text, text, int, text),
  pgrelay._heartbeat(bigint, text, text, int, text),
  pgrelay._processor_stop(bigint),
  pgrelay._rescue(bigint, interval, interval),
  pgrelay._lease(interval), pgrelay._lease_release(bigint),
  pgrelay._adopt(interval), pgrelay._adopt_rows(int, int, bigint[], text),
  pgrelay._trim_log(interval, int, interval),
  pgrelay._trim_event_payloads(interval, int, interval),
  pgrelay._publish_horizon(), pgrelay._notifier_status_batch(int, bigint, bigint, int),
  pgrelay.publish_backlog(int),
  pgrelay.queue_stats(), pgrelay.status(bigint), pgrelay.nodes_overview(interval)
  TO pgrelay_processor;
