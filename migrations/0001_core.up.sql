-- pgrelay core schema: channels, queue, log, nodes, processors, the id generator,
-- the producer API (notify, notify_many, status, queue_stats), the admin API
-- (register, update, unregister) and the Processor's internal functions.
--
-- Conventions
-- * Every function has a fixed search_path and schema-qualifies what it uses.
-- * Only functions a less privileged role must call on data it cannot touch are
--   SECURITY DEFINER: notify, notify_many, status, queue_stats and the admin API.
-- * Errors raised on purpose use SQLSTATE class 'PR' so callers can branch on the
--   code instead of the text (see docs/reference.md for the list).

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

-- ---------------------------------------------------------------------------
-- Node identity and ids
-- ---------------------------------------------------------------------------

-- _this_node: the pg_relay.node_id setting, 0 when unset.
CREATE FUNCTION pgrelay._this_node() RETURNS int
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

-- The generator's state: a 53-bit counter (milliseconds << 12 | sequence) held in
-- a sequence, the only non-transactional counter PostgreSQL has. CACHE 1 keeps
-- the values handed out on a node in one global order.
CREATE SEQUENCE pgrelay._id_seq AS bigint MINVALUE 0 START 0 CACHE 1;

-- _next_id_at: the generator for a given clock reading (milliseconds since
-- 2026-01-01 00:00 UTC). Split out from _next_id so tests can step the clock back.
--
-- Layout: 41-bit milliseconds | 10-bit node id | 12-bit sequence.
-- Uniqueness rests on nextval alone: every id is either a nextval result or the
-- target of a setval that moves the counter forward past it. The counter is
-- moved forward to the clock only when it lags by more than 100 ms worth of
-- values, and only by a session holding an advisory lock, so two sessions never
-- move it concurrently (a setval race could move it back); a session that finds
-- the lock taken waits the few microseconds it is held, so no id lags the clock
-- by more than 100 ms (the NATS publisher's horizon relies on that). The lock is
-- a session-level one released at once: a transaction-level lock would be held until the caller's
-- transaction ends (a producer's long transaction that happened to move the
-- counter), and meanwhile no other session could move it, so every id of the
-- database would fall behind the clock. A clock that steps back leaves the
-- counter where it is: ids keep growing. More than 4096 ids in one millisecond
-- run the counter into the next millisecond, as pgEdge's snowflake does.
CREATE FUNCTION pgrelay._next_id_at(p_ms bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v bigint := pg_catalog.nextval('pgrelay._id_seq');
  t bigint := p_ms << 12;
BEGIN
  IF v < t - 409600 THEN
    BEGIN
      -- Taken inside the block, so a cancel that lands while it is held
      -- still releases it.
      PERFORM pg_catalog.pg_advisory_lock(1886816817, 1);
      v := pg_catalog.nextval('pgrelay._id_seq');
      IF v < t - 409600 THEN
        PERFORM pg_catalog.setval('pgrelay._id_seq', t, true);
        v := t;
      END IF;
      PERFORM pg_catalog.pg_advisory_unlock(1886816817, 1);
    EXCEPTION WHEN OTHERS OR QUERY_CANCELED THEN
      PERFORM pg_catalog.pg_advisory_unlock(1886816817, 1);
      RAISE;
    END;
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
-- Tables
-- ---------------------------------------------------------------------------

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
  -- Events published on NATS carry the payload only when the channel opts in
  -- (payloads may hold secrets).
  publish_payload  bool NOT NULL DEFAULT false,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT channels_name CHECK (channel ~ '^[A-Za-z0-9_-]{1,100}$'),
  CONSTRAINT channels_kind CHECK (kind IN ('sql', 'email', 'nats')),
  CONSTRAINT channels_mode CHECK (concurrency_mode IN ('none', 'channel', 'payload')),
  CONSTRAINT channels_attempts CHECK (max_attempts > 0),
  CONSTRAINT channels_retry_delay CHECK (retry_delay >= interval '0'),
  CONSTRAINT channels_expire_after CHECK (expire_after IS NULL OR expire_after > interval '0'),
  CONSTRAINT channels_timeout CHECK (timeout > interval '0')
);

-- Pending and in-flight work only: a row is deleted when its attempt ends.
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

-- One row per node: heartbeat of the node's Processors, their mode. The row
-- with node_id = -1 is the leader lease of --mode leader: leader_node holds it
-- until lease_until; term grows by one at every take and fences a former
-- leader's claims. A single row, so that two nodes taking it at once converge
-- (under multi-master replication the later update wins on both nodes).
CREATE TABLE pgrelay.nodes (
  node_id     int PRIMARY KEY,
  last_seen   timestamptz NOT NULL DEFAULT now(),
  mode        text NOT NULL,
  hostname    text NULL,
  version     text NULL,
  started_at  timestamptz NOT NULL DEFAULT now(),
  leader_node int NULL,
  term        bigint NULL,
  lease_until timestamptz NULL,
  taken_at    timestamptz NULL,
  adopted_at  timestamptz NULL,
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

-- ---------------------------------------------------------------------------
-- Triggers
-- ---------------------------------------------------------------------------

-- Derives a queue row's columns from its channel on the node of origin. As an
-- ordinary (ENABLE ORIGIN) trigger it does not fire for rows that arrive through
-- logical replication, so a replicated row keeps its original pin.
CREATE FUNCTION pgrelay._queue_before_insert() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels;
BEGIN
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

CREATE TRIGGER queue_before_insert BEFORE INSERT ON pgrelay.queue
  FOR EACH ROW EXECUTE FUNCTION pgrelay._queue_before_insert();

-- Wakes listening Processors once per statement that inserted rows.
CREATE FUNCTION pgrelay._queue_wake() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF EXISTS (SELECT FROM new_rows) THEN
    PERFORM pg_catalog.pg_notify('pgrelay', '');
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER queue_wake AFTER INSERT ON pgrelay.queue
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION pgrelay._queue_wake();

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

-- ---------------------------------------------------------------------------
-- Admin API
-- ---------------------------------------------------------------------------

-- _check_channel: the validation register() and update() share.
CREATE FUNCTION pgrelay._check_channel(c pgrelay.channels, p_check_handler bool DEFAULT true) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_stmt text;
  v_types text[];
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
    IF c.handler !~ '^[^\s.*>]+(\.[^\s.*>]+)*$' THEN
      RAISE EXCEPTION 'pgrelay: channel %: % is not a valid NATS subject (dot-separated tokens, no spaces or wildcards)',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017';
    END IF;
  END IF;
END
$$;

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
  p_publish_payload bool DEFAULT false
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  c pgrelay.channels;
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
  -- Serialise with a concurrent register() of the same name.
  PERFORM pg_catalog.pg_advisory_xact_lock(1886816817, pg_catalog.hashtext(p_channel));
  IF EXISTS (SELECT FROM pgrelay.channels x WHERE x.channel = p_channel) THEN
    RAISE EXCEPTION 'pgrelay: channel % already exists', pg_catalog.quote_literal(p_channel)
      USING ERRCODE = 'PR003', HINT = 'Use pgrelay.update() to change it.';
  END IF;
  INSERT INTO pgrelay.channels (channel, handler, kind, concurrency_mode, deduplicate,
                                node_restricted, max_attempts, retry_delay, expire_after, timeout,
                                publish_payload)
  VALUES (c.channel, c.handler, c.kind, c.concurrency_mode, c.deduplicate,
          c.node_restricted, c.max_attempts, c.retry_delay, c.expire_after, c.timeout,
          c.publish_payload);
END
$$;

-- update: NULL means unchanged. p_expire_after := '0' removes the expiry.
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
  p_publish_payload bool DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  old pgrelay.channels;
  c pgrelay.channels;
BEGIN
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

CREATE FUNCTION pgrelay.unregister(p_channel text, p_force bool DEFAULT false) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n bigint;
BEGIN
  PERFORM FROM pgrelay.channels x WHERE x.channel = p_channel FOR UPDATE;
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
END
$$;

-- ---------------------------------------------------------------------------
-- Producer API
-- ---------------------------------------------------------------------------

-- _check_notify: the checks notify() and notify_many() share; returns the channel.
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

-- _check_payload: NULL and oversized payloads are refused (1 MiB limit).
CREATE FUNCTION pgrelay._check_payload(p_channel text, p_payload text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF p_payload IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify: payload for channel % must not be NULL (use an empty string)',
      pg_catalog.quote_literal(p_channel) USING ERRCODE = 'PR005';
  END IF;
  IF pg_catalog.octet_length(p_payload) > 1048576 THEN
    RAISE EXCEPTION 'pgrelay.notify: payload for channel % is % bytes, over the 1 MiB (1048576 bytes) limit',
      pg_catalog.quote_literal(p_channel), pg_catalog.octet_length(p_payload) USING ERRCODE = 'PR006';
  END IF;
END
$$;

-- _enqueue_dedup: the deduplicating insert of one payload. A pending (not yet
-- dispatched) row with the same payload absorbs the call: its origin id is
-- returned and the suppressed call is logged as 'deduplicated' under a fresh
-- id, with queue_id naming the row that absorbed it.
CREATE FUNCTION pgrelay._enqueue_dedup(ch pgrelay.channels, p_payload text) RETURNS bigint
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
   LIMIT 1;
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

CREATE FUNCTION pgrelay.notify(p_channel text, p_payload text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  v_id bigint;
BEGIN
  PERFORM pgrelay._check_payload(p_channel, p_payload);
  IF ch.deduplicate THEN
    RETURN pgrelay._enqueue_dedup(ch, p_payload);
  END IF;
  INSERT INTO pgrelay.queue (channel, payload, run_in_node)
  VALUES (p_channel, p_payload, CASE WHEN ch.node_restricted THEN pgrelay._this_node() END)
  RETURNING id INTO v_id;
  RETURN v_id;
END
$$;

-- notify_many: ids are returned in the order of p_payloads.
CREATE FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[]) RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  p text;
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
  RETURN QUERY
  WITH ins AS (
    INSERT INTO pgrelay.queue (channel, payload, run_in_node)
    SELECT p_channel, u.payload, CASE WHEN ch.node_restricted THEN pgrelay._this_node() END
      FROM pg_catalog.unnest(p_payloads) WITH ORDINALITY AS u(payload, n)
     ORDER BY u.n
    RETURNING id
  )
  SELECT ins.id FROM ins ORDER BY ins.id;
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
-- row of such a channel is pinned), 0 otherwise.
CREATE FUNCTION pgrelay.queue_stats()
RETURNS TABLE (channel text, pending bigint, pending_restricted bigint, in_flight bigint,
               retrying bigint, oldest_pending timestamptz, kind text,
               concurrency_mode text, paused bool, pending_estimated bool)
LANGUAGE plpgsql STABLE SECURITY DEFINER
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
-- Processor internals (called by pgrelay run; SECURITY INVOKER)
-- ---------------------------------------------------------------------------

-- _claim: claims up to p_limit ready rows for Processor p_processor.
--
-- Which rows a Processor may take (its partition) depends on its mode: rows
-- pinned to its node always; unrestricted rows of any owner in 'single' mode and
-- in 'leader' mode while it holds the lease; only its node's own unrestricted
-- rows in 'multi-node' mode.
--
-- Channels are visited in random order and each gets a fair share of the limit,
-- so a backlog in one channel never starves another. Serialised channels
-- ('channel' and 'payload' modes) are claimed lane by lane under a
-- transaction-level advisory lock per lane: with the lock held, a statement that
-- starts after it was taken checks that nothing of the lane is in flight and
-- takes the lane's oldest notification only if it is ready. The lock is what
-- makes this safe against a second claimer (FOR UPDATE SKIP LOCKED alone lets two
-- claimers take a lane's first and second rows at once).
--
-- Only channels of the kinds the Processor can run (p_kinds) are visited: a
-- Processor without an SMTP target leaves email channels pending, it does not
-- burn their attempts.
--
-- Rows past their expires_at are claimed too and flagged: the Processor records
-- them as expired without running them (expiry is checked at dispatch time).
CREATE FUNCTION pgrelay._claim(p_processor bigint, p_mode text, p_leader bool, p_limit int,
                               p_kinds text[] DEFAULT '{sql}', p_term bigint DEFAULT NULL)
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
  SELECT count(*) INTO v_nch FROM pgrelay.channels c WHERE NOT c.paused AND c.kind = ANY (p_kinds);
  IF v_nch = 0 THEN
    RETURN;
  END IF;
  v_share := GREATEST(1, (p_limit + v_nch - 1) / v_nch);

  FOR v_pass IN 1..2 LOOP
    FOR ch IN
      SELECT * FROM pgrelay.channels c
       WHERE NOT c.paused AND c.kind = ANY (p_kinds) AND (v_pass = 1 OR c.channel = ANY (v_full))
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
-- p_events: 'succeeded', 'failed' (retried, or 'gave_up' at max_attempts),
-- 'expired', or 'release' (claimed but never started: back to pending).
-- An outcome applies only while the claim is still the one it was made for
-- (same processor and claim time): a claim that was rescued meanwhile is left
-- alone. Returns the number of outcomes applied.
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
     WHERE q.id = o.id AND q.dispatched_by = p_processor AND q.dispatched_at = o.claimed_at
    RETURNING q.*, o.event AS o_event, o.error AS o_error
  ), d AS (
    SELECT del.*, c.retry_delay,
           CASE WHEN del.o_event = 'failed' AND del.attempt >= COALESCE(c.max_attempts, 0)
                THEN 'gave_up' ELSE del.o_event END AS final
      FROM del LEFT JOIN pgrelay.channels c ON c.channel = del.channel
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node)
    SELECT d.id, d.origin_id, d.channel, d.attempt, d.final,
           CASE WHEN d.o_error IS NULL THEN NULL ELSE pg_catalog.left(d.o_error, 8000) END, v_node
      FROM d ORDER BY d.id
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

-- _processor_start: registers a Processor instance and its node.
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
        version = EXCLUDED.version;
  RETURN v_id;
END
$$;

-- _heartbeat: marks a Processor instance and its node alive. Returns false when
-- the instance's row was gone (it was presumed dead and its claims were taken
-- back); the row is then recreated.
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
        version = EXCLUDED.version;
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
-- instance, or an instance whose row is gone). A taken-back claim counts as an
-- attempt, as a crash or hang of the Processor while the handler ran may be
-- the event's own doing: the row goes back to pending with attempt + 1 and a
-- 'rescued' log row, or, when that was its last attempt, ends 'gave_up'. So an
-- event that kills its Processor cannot loop forever.
CREATE FUNCTION pgrelay._rescue(p_processor bigint, p_dead_after interval, p_lease_grace interval)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_dead bigint[];
  n int;
BEGIN
  WITH dead AS (
    DELETE FROM pgrelay.processors p
     WHERE p.node_id = v_node AND p.processor_id <> p_processor
       AND p.last_seen < now() - p_dead_after
    RETURNING p.processor_id
  )
  SELECT COALESCE(pg_catalog.array_agg(dead.processor_id), '{}') INTO v_dead FROM dead;

  -- The holder is read before the update (RETURNING would see it cleared).
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
    RETURNING q.id
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
  SELECT count(*) INTO n FROM lg;
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
-- another node can take over without waiting for it to run out.
CREATE FUNCTION pgrelay._lease_release(p_term bigint) RETURNS bool
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  UPDATE pgrelay.nodes n SET lease_until = now()
   WHERE n.node_id = -1 AND n.leader_node = pgrelay._this_node() AND n.term = p_term
     AND n.lease_until > now();
  RETURN FOUND;
END
$$;

-- _adopt: the unrestricted work of dead nodes (no heartbeat for p_dead_after)
-- is taken over by exactly one live node: the live node with the smallest id,
-- a choice every node makes the same from the same replicated nodes table.
-- Adopted rows: those the dead node owned (owner_node becomes this node) and
-- those its Processors had claimed (back to pending); each gets an 'adopted'
-- log row. Rows pinned to the dead node (node-restricted channels) are never
-- adopted: they wait for it, or for pgrelay.decommission(). A dead node is
-- looked at again at most every p_dead_after, for rows that reached this node
-- late through replication.
CREATE FUNCTION pgrelay._adopt(p_dead_after interval) RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_dead int;
  v_adopter int;
  v_procs bigint[];
  n int := 0;
  m int;
BEGIN
  SELECT min(x.node_id) INTO v_adopter FROM pgrelay.nodes x
   WHERE x.node_id >= 0 AND x.last_seen >= now() - p_dead_after AND x.mode <> 'single';
  IF v_adopter IS DISTINCT FROM v_node THEN
    RETURN 0;
  END IF;
  FOR v_dead IN
    SELECT x.node_id FROM pgrelay.nodes x
     WHERE x.node_id >= 0 AND x.node_id <> v_node AND x.last_seen < now() - p_dead_after
       AND x.mode <> 'single'
       AND (x.adopted_at IS NULL OR x.adopted_at < now() - p_dead_after)
     ORDER BY x.node_id
     FOR UPDATE SKIP LOCKED
  LOOP
    SELECT COALESCE(pg_catalog.array_agg(p.processor_id), '{}') INTO v_procs
      FROM pgrelay.processors p WHERE p.node_id = v_dead;
    WITH t AS (
      SELECT q.id, q.origin_id, q.channel, q.attempt, q.owner_node, q.dispatched_at IS NOT NULL AS was_claimed
        FROM pgrelay.queue q
       WHERE q.run_in_node IS NULL
         AND (q.owner_node = v_dead OR (q.dispatched_at IS NOT NULL AND q.dispatched_by = ANY (v_procs)))
       FOR UPDATE OF q SKIP LOCKED
    ), u AS (
      UPDATE pgrelay.queue q
         SET owner_node = CASE WHEN q.owner_node = v_dead THEN v_node ELSE q.owner_node END,
             dispatched_at = CASE WHEN q.dispatched_by = ANY (v_procs) THEN NULL ELSE q.dispatched_at END,
             dispatched_by = CASE WHEN q.dispatched_by = ANY (v_procs) THEN NULL ELSE q.dispatched_by END
        FROM t
       WHERE q.id = t.id
      RETURNING q.id
    ), lg AS (
      INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node)
      SELECT t.id, t.origin_id, t.channel, t.attempt, 'adopted',
             pg_catalog.format('node %s is dead (no heartbeat for %s); adopted by node %s%s', v_dead,
                               p_dead_after, v_node,
                               CASE WHEN t.was_claimed THEN ' (its claim was taken back)' ELSE '' END),
             v_node
        FROM t WHERE t.id IN (SELECT u.id FROM u)
       ORDER BY t.id
      RETURNING 1
    )
    SELECT count(*) INTO m FROM lg;
    DELETE FROM pgrelay.processors p WHERE p.node_id = v_dead;
    UPDATE pgrelay.nodes x SET adopted_at = now() WHERE x.node_id = v_dead;
    n := n + m;
  END LOOP;
  RETURN n;
END
$$;

-- decommission: node p_node is gone for good. Its pinned rows (node-restricted
-- channels) can never run anywhere else: they are discarded, each logged
-- 'gave_up' with the reason; its node and processor rows are removed.
-- Refuses a node that heartbeated within p_dead_after. Run on any node: the
-- deletes replicate.
CREATE FUNCTION pgrelay.decommission(p_node int, p_dead_after interval DEFAULT '1 minute')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_seen timestamptz;
  n bigint;
BEGIN
  IF p_node IS NULL OR p_node < 0 OR p_node > 1023 THEN
    RAISE EXCEPTION 'pgrelay.decommission: node id % is outside 0..1023', p_node USING ERRCODE = 'PR020';
  END IF;
  SELECT x.last_seen INTO v_seen FROM pgrelay.nodes x WHERE x.node_id = p_node;
  IF v_seen >= now() - p_dead_after THEN
    RAISE EXCEPTION 'pgrelay.decommission: node % heartbeated % ago; stop its Processors first',
      p_node, now() - v_seen USING ERRCODE = 'PR022',
      HINT = 'A node is decommissioned only once it has been silent for p_dead_after.';
  END IF;
  WITH d AS (
    DELETE FROM pgrelay.queue q
     WHERE q.run_in_node = p_node AND q.dispatched_at IS NULL
    RETURNING q.id, q.origin_id, q.channel, q.attempt
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error)
    SELECT d.id, d.origin_id, d.channel, d.attempt, 'gave_up',
           pg_catalog.format('node %s was decommissioned: a row pinned to it can never run', p_node)
      FROM d ORDER BY d.id
    RETURNING 1
  )
  SELECT count(*) INTO n FROM lg;
  DELETE FROM pgrelay.processors p WHERE p.node_id = p_node;
  DELETE FROM pgrelay.nodes x WHERE x.node_id = p_node;
  RETURN n;
END
$$;

-- nodes_overview: what `pgrelay nodes` shows, one row per node.
CREATE FUNCTION pgrelay.nodes_overview(p_dead_after interval DEFAULT '10 seconds')
RETURNS TABLE (node_id int, mode text, last_seen timestamptz, alive bool, leader bool,
               processors bigint, pending bigint, pinned bigint, hostname text, version text)
LANGUAGE sql STABLE SECURITY DEFINER
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
  SELECT n.node_id, n.mode, n.last_seen, n.last_seen >= now() - p_dead_after,
         COALESCE((SELECT l.leader_node = n.node_id AND l.lease_until > now() FROM l), false),
         (SELECT count(*) FROM pgrelay.processors p WHERE p.node_id = n.node_id),
         COALESCE(q.pending, 0), COALESCE(q.pinned, 0), n.hostname, n.version
    FROM pgrelay.nodes n LEFT JOIN q ON q.node = n.node_id
   WHERE n.node_id >= 0
   ORDER BY n.node_id
$$;

-- _trim_log: deletes up to p_batch log rows older than p_older_than, oldest
-- first, by primary-key range (ids carry their creation time).
CREATE FUNCTION pgrelay._trim_log(p_older_than interval, p_batch int) RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n int;
BEGIN
  DELETE FROM pgrelay.log l
   WHERE l.id IN (SELECT x.id FROM pgrelay.log x
                   WHERE x.id < pgrelay._id_floor(now() - p_older_than)
                   ORDER BY x.id LIMIT p_batch);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

-- ---------------------------------------------------------------------------
-- Privileges
-- ---------------------------------------------------------------------------

REVOKE ALL ON SCHEMA pgrelay FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA pgrelay FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgrelay FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgrelay FROM PUBLIC;
-- Functions later migrations add are not executable by everyone either.
ALTER DEFAULT PRIVILEGES IN SCHEMA pgrelay REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

GRANT USAGE ON SCHEMA pgrelay TO pgrelay_producer, pgrelay_processor, pgrelay_admin;

-- Producers: enqueue and ask for status, nothing else.
GRANT EXECUTE ON FUNCTION pgrelay.notify(text, text), pgrelay.notify_many(text, text[]),
                          pgrelay.status(bigint), pgrelay._this_node()
  TO pgrelay_producer;

-- Admins: manage channels and watch the queue.
GRANT EXECUTE ON FUNCTION
  pgrelay.register(text, text, text, text, bool, bool, int, interval, interval, interval, bool),
  pgrelay.update(text, text, text, text, bool, bool, int, interval, interval, interval, bool, bool),
  pgrelay.unregister(text, bool),
  pgrelay.queue_stats(), pgrelay.status(bigint),
  pgrelay.notify(text, text), pgrelay.notify_many(text, text[]),
  pgrelay._this_node()
  TO pgrelay_admin;
GRANT SELECT ON pgrelay.channels, pgrelay.queue, pgrelay.log, pgrelay.nodes, pgrelay.processors
  TO pgrelay_admin;
GRANT SELECT ON pgrelay.schema_migrations TO pgrelay_admin, pgrelay_processor;

-- Processors: claim, run, complete, heartbeat, rescue, trim.
GRANT SELECT ON pgrelay.channels TO pgrelay_processor;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgrelay.queue TO pgrelay_processor;
GRANT SELECT, INSERT, DELETE ON pgrelay.log TO pgrelay_processor;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgrelay.nodes, pgrelay.processors TO pgrelay_processor;
GRANT USAGE, UPDATE ON SEQUENCE pgrelay._id_seq TO pgrelay_processor;
GRANT EXECUTE ON FUNCTION
  pgrelay._this_node(), pgrelay._next_id(), pgrelay._next_id_at(bigint), pgrelay._id_floor(timestamptz),
  pgrelay._queue_before_insert(), pgrelay._queue_wake(),
  pgrelay._claim(bigint, text, bool, int, text[], bigint), pgrelay._backoff(interval, int),
  pgrelay._complete(bigint, bigint[], timestamptz[], text[], text[]),
  pgrelay._processor_start(text, text, int, text),
  pgrelay._heartbeat(bigint, text, text, int, text),
  pgrelay._processor_stop(bigint),
  pgrelay._rescue(bigint, interval, interval),
  pgrelay._trim_log(interval, int),
  pgrelay._lease(interval), pgrelay._lease_release(bigint), pgrelay._adopt(interval),
  pgrelay._queue_wake_replica(),
  pgrelay.queue_stats(), pgrelay.status(bigint), pgrelay.nodes_overview(interval)
  TO pgrelay_processor;
GRANT EXECUTE ON FUNCTION pgrelay.decommission(int, interval), pgrelay.nodes_overview(interval)
  TO pgrelay_admin;
