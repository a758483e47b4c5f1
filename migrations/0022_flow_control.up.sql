-- Flow control in the claim (issue 30): priorities, a concurrency limit and
-- a rate limit per channel.
--
-- * Priorities. Within a channel the claim takes higher priorities first,
--   strictly; equal priorities keep the order of today (due time, then id).
--   A serialised lane ('channel' and 'payload' mode) stays FIFO: priority
--   only chooses among the heads of lanes. Across channels, a channel's
--   default priority orders the claim's visits; channels of equal priority
--   are visited in a random order each claim, sharing it fairly as before.
--   Rows of priority 0 (every row of a channel that sets none) are in no new
--   index: queue_priority holds the other rows only, so a queue that uses no
--   priority pays nothing for it, and the claim of a channel tells the two
--   cases apart with one probe of that (then empty) index.
-- * max_in_flight: at most that many events of the channel running at once,
--   events inside a running batch included. rate_limit / rate_period: at
--   most rate_limit claims (starts) in any window of rate_period. Both are
--   counted by the claim, which locks the channel's row of flow_locks until
--   it commits, so that two Processors' claims of one limited channel
--   follow each other. flow_locks and flow_starts belong to their node
--   (migrations.NodeLocalTables): in single and leader mode they bound the
--   database's Processors together; in multi-node mode each node's, which
--   claim only their own rows. A limited channel never runs in direct
--   batches (which hold their rows locked for the batch, unseen by a count):
--   its events are claimed, and run as a non-batched channel's.
--   Channels that set neither limit take none of these steps.

ALTER TABLE pgrelay.channels
  ADD COLUMN max_in_flight int,
  ADD COLUMN rate_limit int,
  ADD COLUMN rate_period interval,
  ADD CONSTRAINT channels_max_in_flight CHECK (max_in_flight IS NULL OR max_in_flight > 0),
  ADD CONSTRAINT channels_rate_limit CHECK (rate_limit IS NULL OR rate_limit > 0),
  ADD CONSTRAINT channels_rate_period CHECK ((rate_limit IS NULL) = (rate_period IS NULL)
                                             AND (rate_period IS NULL OR rate_period > interval '0'));

-- The rows of a priority other than 0, in the order a claim takes them.
CREATE INDEX queue_priority ON pgrelay.queue (channel, priority DESC, not_before, id)
  WHERE dispatched_at IS NULL AND priority <> 0;

-- The rows in flight, by Processor and channel: the rescue's index as
-- before (its leading column), and the count of a channel's running events
-- (_claim_allowance), one probe per Processor with rows in flight. The same
-- entries as before: no index more for a claim to write.
DROP INDEX pgrelay.queue_inflight;
CREATE INDEX queue_inflight ON pgrelay.queue (dispatched_by, channel)
  WHERE dispatched_at IS NOT NULL;

-- One row per limited channel, created by its first claim: the lock that
-- orders the claims of the channel on this node. Unlogged: a crash empties
-- it, and the next claim creates the row again.
CREATE UNLOGGED TABLE pgrelay.flow_locks (
  channel text PRIMARY KEY
);

-- The claims of rate-limited channels on this node within their period: when
-- (the claim's now(), as its rows' dispatched_at) and how many. A claim
-- deletes its channel's rows older than the period (and a minute).
-- Unlogged: a crash forgets the current window (one window may then hold up
-- to twice the limit).
CREATE UNLOGGED TABLE pgrelay.flow_starts (
  channel text NOT NULL,
  started_at timestamptz NOT NULL,
  n int NOT NULL CHECK (n > 0)
);
CREATE INDEX flow_starts_channel ON pgrelay.flow_starts (channel, started_at);

REVOKE ALL ON pgrelay.flow_locks, pgrelay.flow_starts FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgrelay.flow_locks, pgrelay.flow_starts TO pgrelay_processor;
GRANT SELECT ON pgrelay.flow_locks, pgrelay.flow_starts TO pgrelay_admin, pgrelay_viewer;

-- _check_flow: the flow settings register() and update() store, checked
-- (PR009: priority, PR019: the limits).
CREATE FUNCTION pgrelay._check_flow(p_channel text, p_priority int, p_max_in_flight int,
                                    p_rate_limit int, p_rate_period interval) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF p_priority IS NOT NULL AND (p_priority < -32768 OR p_priority > 32767) THEN
    RAISE EXCEPTION 'pgrelay: channel %: priority must be between -32768 and 32767, got %',
      p_channel, p_priority USING ERRCODE = 'PR009';
  END IF;
  IF p_max_in_flight IS NOT NULL AND p_max_in_flight < 0 THEN
    RAISE EXCEPTION 'pgrelay: channel %: max_in_flight must be positive (0: no limit), got %',
      p_channel, p_max_in_flight USING ERRCODE = 'PR019';
  END IF;
  IF p_rate_limit IS NOT NULL AND p_rate_limit < 0 THEN
    RAISE EXCEPTION 'pgrelay: channel %: rate_limit must be positive (0: no limit), got %',
      p_channel, p_rate_limit USING ERRCODE = 'PR019';
  END IF;
  IF p_rate_period IS NOT NULL AND (p_rate_period <= interval '0' OR p_rate_period > interval '1 day') THEN
    RAISE EXCEPTION 'pgrelay: channel %: rate_period must be positive and at most 1 day, got %',
      p_channel, p_rate_period USING ERRCODE = 'PR019';
  END IF;
END
$$;

-- register, update and create_channel gain p_priority, p_max_in_flight,
-- p_rate_limit and p_rate_period, last (as 0019 did for p_publish_enqueued).
-- register: 0 (or NULL) sets no limit; p_rate_period defaults to 1 second
-- once p_rate_limit is set, and needs one.

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
  p_publish_errors text DEFAULT 'class',
  p_publish_enqueued bool DEFAULT false,
  p_priority int DEFAULT 0,
  p_max_in_flight int DEFAULT NULL,
  p_rate_limit int DEFAULT NULL,
  p_rate_period interval DEFAULT NULL
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
  c.publish_enqueued := COALESCE(p_publish_enqueued, false);
  PERFORM pgrelay._check_channel(c);
  PERFORM pgrelay._check_flow(p_channel, p_priority, p_max_in_flight, p_rate_limit, p_rate_period);
  IF p_rate_period IS NOT NULL AND COALESCE(p_rate_limit, 0) = 0 THEN
    RAISE EXCEPTION 'pgrelay: channel %: rate_period needs a rate_limit', p_channel USING ERRCODE = 'PR019';
  END IF;
  c.priority := COALESCE(p_priority, 0);
  c.max_in_flight := NULLIF(p_max_in_flight, 0);
  c.rate_limit := NULLIF(p_rate_limit, 0);
  c.rate_period := CASE WHEN c.rate_limit IS NOT NULL THEN COALESCE(p_rate_period, interval '1 second') END;
  LOOP
    INSERT INTO pgrelay.channels (channel, handler, kind, concurrency_mode, deduplicate,
                                  node_restricted, max_attempts, retry_delay, expire_after, timeout,
                                  publish_payload, publish_errors, publish_enqueued,
                                  priority, max_in_flight, rate_limit, rate_period)
    VALUES (c.channel, c.handler, c.kind, c.concurrency_mode, c.deduplicate,
            c.node_restricted, c.max_attempts, c.retry_delay, c.expire_after, c.timeout,
            c.publish_payload, c.publish_errors, c.publish_enqueued,
            c.priority, c.max_in_flight, c.rate_limit, c.rate_period)
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
  IF old.publish_enqueued IS DISTINCT FROM c.publish_enqueued THEN
    v_diff := v_diff || pg_catalog.format('publish_enqueued (%s registered, %s given)',
      old.publish_enqueued, c.publish_enqueued);
  END IF;
  IF old.priority IS DISTINCT FROM c.priority THEN
    v_diff := v_diff || pg_catalog.format('priority (%s registered, %s given)', old.priority, c.priority);
  END IF;
  IF old.max_in_flight IS DISTINCT FROM c.max_in_flight THEN
    v_diff := v_diff || pg_catalog.format('max_in_flight (%s registered, %s given)',
      COALESCE(old.max_in_flight::text, 'NULL'), COALESCE(c.max_in_flight::text, 'NULL'));
  END IF;
  IF old.rate_limit IS DISTINCT FROM c.rate_limit OR old.rate_period IS DISTINCT FROM c.rate_period THEN
    v_diff := v_diff || pg_catalog.format('rate limit (%s per %s registered, %s per %s given)',
      COALESCE(old.rate_limit::text, 'NULL'), COALESCE(old.rate_period::text, 'NULL'),
      COALESCE(c.rate_limit::text, 'NULL'), COALESCE(c.rate_period::text, 'NULL'));
  END IF;
  IF pg_catalog.cardinality(v_diff) > 0 THEN
    RAISE EXCEPTION 'pgrelay: channel % already exists with a different definition: %',
      pg_catalog.quote_literal(p_channel), pg_catalog.array_to_string(v_diff, ', ')
      USING ERRCODE = 'PR003',
            HINT = 'Use pgrelay.update() to change it; registering an identical definition again is a no-op.';
  END IF;
END
$$;

-- update: NULL keeps a setting; p_max_in_flight := 0 and p_rate_limit := 0
-- remove the limit (as p_expire_after := '0' clears the expiry);
-- p_rate_period alone changes the period of the channel's rate limit.
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
  p_publish_errors text DEFAULT NULL,
  p_publish_enqueued bool DEFAULT NULL,
  p_priority int DEFAULT NULL,
  p_max_in_flight int DEFAULT NULL,
  p_rate_limit int DEFAULT NULL,
  p_rate_period interval DEFAULT NULL
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
  c.publish_enqueued := COALESCE(p_publish_enqueued, old.publish_enqueued);
  -- The handler is re-checked only when it or the kind changes: pausing a
  -- channel whose handler's function was dropped must still work.
  PERFORM pgrelay._check_channel(c, c.handler IS DISTINCT FROM old.handler OR c.kind IS DISTINCT FROM old.kind);
  PERFORM pgrelay._check_flow(p_channel, p_priority, p_max_in_flight, p_rate_limit, p_rate_period);
  c.priority := COALESCE(p_priority, old.priority);
  c.max_in_flight := CASE WHEN p_max_in_flight IS NULL THEN old.max_in_flight
                          ELSE NULLIF(p_max_in_flight, 0) END;
  IF p_rate_limit = 0 THEN
    IF p_rate_period IS NOT NULL THEN
      RAISE EXCEPTION 'pgrelay: channel %: rate_period needs a rate_limit (p_rate_limit := 0 removes it)',
        p_channel USING ERRCODE = 'PR019';
    END IF;
    c.rate_limit := NULL;
    c.rate_period := NULL;
  ELSE
    c.rate_limit := COALESCE(p_rate_limit, old.rate_limit);
    IF c.rate_limit IS NULL AND p_rate_period IS NOT NULL THEN
      RAISE EXCEPTION 'pgrelay: channel %: rate_period needs a rate_limit (the channel has none)',
        p_channel USING ERRCODE = 'PR019';
    END IF;
    c.rate_period := CASE WHEN c.rate_limit IS NOT NULL
                          THEN COALESCE(p_rate_period, old.rate_period, interval '1 second') END;
  END IF;
  UPDATE pgrelay.channels x
     SET handler = c.handler, kind = c.kind, concurrency_mode = c.concurrency_mode,
         deduplicate = c.deduplicate, node_restricted = c.node_restricted,
         max_attempts = c.max_attempts, retry_delay = c.retry_delay,
         expire_after = c.expire_after, timeout = c.timeout, paused = c.paused,
         publish_payload = c.publish_payload, publish_errors = c.publish_errors,
         publish_enqueued = c.publish_enqueued, priority = c.priority,
         max_in_flight = c.max_in_flight, rate_limit = c.rate_limit, rate_period = c.rate_period,
         updated_at = now()
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
  -- A new default priority is for the events enqueued from now on: those
  -- queued keep theirs.
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

CREATE FUNCTION pgrelay_notifier.create_channel(
  p_channel text,
  p_from text,
  p_concurrency_mode text DEFAULT 'none',
  p_deduplicate bool DEFAULT false,
  p_node_restricted bool DEFAULT false,
  p_max_attempts int DEFAULT 10,
  p_retry_delay interval DEFAULT '10 seconds',
  p_expire_after interval DEFAULT NULL,
  p_timeout interval DEFAULT '30 seconds',
  p_publish_payload bool DEFAULT false,
  p_publish_errors text DEFAULT 'class',
  p_publish_enqueued bool DEFAULT false,
  p_priority int DEFAULT 0,
  p_max_in_flight int DEFAULT NULL,
  p_rate_limit int DEFAULT NULL,
  p_rate_period interval DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgrelay_notifier._check_address('from', p_from);
  PERFORM pgrelay.register(
    p_channel := p_channel,
    p_handler := pg_catalog.btrim(p_from),
    p_kind := 'email',
    p_concurrency_mode := p_concurrency_mode,
    p_deduplicate := p_deduplicate,
    p_node_restricted := p_node_restricted,
    p_max_attempts := p_max_attempts,
    p_retry_delay := p_retry_delay,
    p_expire_after := p_expire_after,
    p_timeout := p_timeout,
    p_publish_payload := p_publish_payload,
    p_publish_errors := p_publish_errors,
    p_publish_enqueued := p_publish_enqueued,
    p_priority := p_priority,
    p_max_in_flight := p_max_in_flight,
    p_rate_limit := p_rate_limit,
    p_rate_period := p_rate_period);
END
$$;

-- Each new function takes the old one's owner and privileges, then the old
-- one goes (as in 0019).
GRANT CREATE ON SCHEMA pgrelay_notifier TO pgrelay_notifier;
DO $$
DECLARE
  r record;
  g record;
BEGIN
  FOR r IN
    SELECT o.oid AS old_fn, n.oid AS new_fn, o.proowner
      FROM (VALUES
        ('pgrelay.register(text, text, text, text, bool, bool, int, interval, interval, interval, bool, text, bool)',
         'pgrelay.register(text, text, text, text, bool, bool, int, interval, interval, interval, bool, text, bool, int, int, int, interval)'),
        ('pgrelay.update(text, text, text, text, bool, bool, int, interval, interval, interval, bool, bool, text, bool)',
         'pgrelay.update(text, text, text, text, bool, bool, int, interval, interval, interval, bool, bool, text, bool, int, int, int, interval)'),
        ('pgrelay_notifier.create_channel(text, text, text, bool, bool, int, interval, interval, interval, bool, text, bool)',
         'pgrelay_notifier.create_channel(text, text, text, bool, bool, int, interval, interval, interval, bool, text, bool, int, int, int, interval)')
      ) AS f(old_sig, new_sig)
      JOIN pg_catalog.pg_proc o ON o.oid = f.old_sig::pg_catalog.regprocedure
      JOIN pg_catalog.pg_proc n ON n.oid = f.new_sig::pg_catalog.regprocedure
  LOOP
    EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO %I', r.new_fn::pg_catalog.regprocedure,
                              pg_catalog.pg_get_userbyid(r.proowner));
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', r.new_fn::pg_catalog.regprocedure);
    FOR g IN
      SELECT a.grantee, a.is_grantable
        FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
       WHERE p.oid = r.old_fn AND a.grantee <> p.proowner
    LOOP
      EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', r.new_fn::pg_catalog.regprocedure,
        CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END,
        CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    EXECUTE pg_catalog.format('DROP FUNCTION %s', r.old_fn::pg_catalog.regprocedure);
  END LOOP;
END
$$;
REVOKE CREATE ON SCHEMA pgrelay_notifier FROM pgrelay_notifier;
REVOKE ALL ON FUNCTION pgrelay._check_flow(text, int, int, int, interval) FROM PUBLIC;

-- _claim_visits: as in 0010, but a limited channel is never left to direct
-- batches: _claim visits it whatever p_direct and p_direct_kinds say.
CREATE OR REPLACE FUNCTION pgrelay._claim_visits(c pgrelay.channels, p_kinds text[], p_direct bool,
                                                 p_direct_kinds text[]) RETURNS bool
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN NOT c.paused AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_kinds)
   AND (c.max_in_flight IS NOT NULL OR c.rate_limit IS NOT NULL
        OR (NOT (p_direct AND c.kind = 'sql')
            AND NOT COALESCE(c.concurrency_mode = 'none'
                             AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_direct_kinds), false)));

-- _claim_allowance: how many of p_want events of ch, a limited channel, a
-- claim may start now (p_node, p_all, p_own: _claim_scope's). It locks the
-- channel's flow_locks row until the claim's transaction ends: the next claim
-- of the channel on this node waits, then counts what this one started.
-- A claim that starts any calls _claim_started before it commits.
CREATE FUNCTION pgrelay._claim_allowance(ch pgrelay.channels, p_node int, p_all bool, p_own bool,
                                         p_want int) RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_n int := p_want;
  v_busy bigint;
  v_started bigint;
BEGIN
  IF ch.max_in_flight IS NULL AND ch.rate_limit IS NULL OR p_want <= 0 THEN
    RETURN p_want;
  END IF;
  PERFORM FROM pgrelay.flow_locks l WHERE l.channel = ch.channel FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO pgrelay.flow_locks (channel) VALUES (ch.channel) ON CONFLICT DO NOTHING;
    PERFORM FROM pgrelay.flow_locks l WHERE l.channel = ch.channel FOR UPDATE;
  END IF;
  IF ch.max_in_flight IS NOT NULL THEN
    -- A loose index scan over the Processors with rows in flight
    -- (queue_inflight), then the channel's rows of each.
    WITH RECURSIVE d(p) AS (
      (SELECT q.dispatched_by FROM pgrelay.queue q
        WHERE q.dispatched_at IS NOT NULL AND q.dispatched_by IS NOT NULL
        ORDER BY q.dispatched_by LIMIT 1)
      UNION ALL
      SELECT (SELECT q.dispatched_by FROM pgrelay.queue q
               WHERE q.dispatched_at IS NOT NULL AND q.dispatched_by > d.p
               ORDER BY q.dispatched_by LIMIT 1)
        FROM d WHERE d.p IS NOT NULL
    )
    SELECT count(*) INTO v_busy
      FROM d JOIN pgrelay.queue q ON q.dispatched_by = d.p
     WHERE q.channel = ch.channel AND q.dispatched_at IS NOT NULL
       AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own);
    v_n := LEAST(v_n, GREATEST(0, ch.max_in_flight - v_busy)::int);
  END IF;
  IF ch.rate_limit IS NOT NULL AND v_n > 0 THEN
    -- Starts are timed as their claims are (dispatched_at): now(), the
    -- claim transaction's start. A claim counts every start it can see
    -- within the period before its own time; those of a claim that began
    -- earlier but took the lock later count too. The rows are kept a minute
    -- longer than the period, for a claim that waited that long for the lock.
    DELETE FROM pgrelay.flow_starts s
     WHERE s.channel = ch.channel AND s.started_at < now() - ch.rate_period - interval '1 minute';
    SELECT COALESCE(sum(s.n), 0) INTO v_started FROM pgrelay.flow_starts s
     WHERE s.channel = ch.channel AND s.started_at > now() - ch.rate_period;
    v_n := LEAST(v_n, GREATEST(0, ch.rate_limit - v_started)::int);
  END IF;
  RETURN v_n;
END
$$;

-- _claim_started: a claim started p_n events of a rate-limited channel now.
CREATE FUNCTION pgrelay._claim_started(p_channel text, p_n int) RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
  INSERT INTO pgrelay.flow_starts (channel, started_at, n)
  SELECT p_channel, now(), p_n WHERE p_n > 0;
END;

-- _claim_pick: locks (FOR UPDATE SKIP LOCKED) and returns up to p_limit ready
-- rows of a 'none' channel in the order of priorities: the rows above 0
-- (queue_priority), those of 0 (queue_ready), those below 0. Only for a
-- channel with rows of a priority other than 0: the others take their rows
-- in one statement, as before.
CREATE FUNCTION pgrelay._claim_pick(p_channel text, p_node int, p_all bool, p_own bool, p_limit int)
  RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_left int := p_limit;
  v_n int;
BEGIN
  RETURN QUERY
  SELECT q.id FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.priority > 0 AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
   ORDER BY q.priority DESC, q.not_before, q.id
   LIMIT v_left
     FOR UPDATE SKIP LOCKED;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  v_left := v_left - v_n;
  IF v_left <= 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT q.id FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.not_before <= now() AND q.priority = 0
     AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
   ORDER BY q.not_before, q.id
   LIMIT v_left
     FOR UPDATE SKIP LOCKED;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  v_left := v_left - v_n;
  IF v_left <= 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT q.id FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.priority < 0 AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
   ORDER BY q.priority DESC, q.not_before, q.id
   LIMIT v_left
     FOR UPDATE SKIP LOCKED;
END
$$;

-- _claim_prioritised: whether channel p_channel has rows not dispatched of
-- a priority other than 0 (one probe of queue_priority).
CREATE FUNCTION pgrelay._claim_prioritised(p_channel text) RETURNS bool
LANGUAGE sql STABLE
BEGIN ATOMIC
  SELECT EXISTS (SELECT FROM pgrelay.queue q
                  WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.priority <> 0);
END;

-- _claim_none: as in 0010, in the order of priorities, within the channel's
-- limits. (A Processor claims again once the outcomes it wrote free a place.)
CREATE OR REPLACE FUNCTION pgrelay._claim_none(p_processor bigint, ch pgrelay.channels, p_node int, p_all bool,
                                    p_own bool, p_limit int)
  RETURNS TABLE (id bigint, origin_id bigint, channel text, payload text, attempt int,
                 enqueued_at timestamptz, dispatched_at timestamptz, expired bool, kind text,
                 handler text, concurrency_mode text, timeout_ms bigint, max_attempts int)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_limited bool := ch.max_in_flight IS NOT NULL OR ch.rate_limit IS NOT NULL;
  v_limit int := p_limit;
  v_got int;
BEGIN
  IF v_limited THEN
    v_limit := pgrelay._claim_allowance(ch, p_node, p_all, p_own, p_limit);
    IF v_limit <= 0 THEN
      RETURN;
    END IF;
  END IF;
  IF NOT pgrelay._claim_prioritised(ch.channel) THEN
    RETURN QUERY
    WITH cand AS (
      SELECT q.id
        FROM pgrelay.queue q
       WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.not_before <= now()
         AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
       ORDER BY q.not_before, q.id
       LIMIT v_limit
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
    GET DIAGNOSTICS v_got = ROW_COUNT;
  ELSE
    RETURN QUERY
    WITH upd AS (
      UPDATE pgrelay.queue q
         SET dispatched_at = now(), dispatched_by = p_processor
       WHERE q.id = ANY (ARRAY(SELECT pgrelay._claim_pick(ch.channel, p_node, p_all, p_own, v_limit)))
      RETURNING q.*
    )
    SELECT u.id, u.origin_id, u.channel, u.payload, u.attempt, u.enqueued_at,
           u.dispatched_at, COALESCE(u.expires_at <= now(), false), ch.kind, ch.handler,
           ch.concurrency_mode, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint,
           ch.max_attempts
      FROM upd u
     ORDER BY u.priority DESC, u.not_before, u.id;
    GET DIAGNOSTICS v_got = ROW_COUNT;
  END IF;
  IF ch.rate_limit IS NOT NULL THEN
    PERFORM pgrelay._claim_started(ch.channel, v_got);
  END IF;
END
$$;

-- _claim: as in 0010, with the channels visited in the order of their
-- priority (at random among equals), the heads of a 'payload' channel's
-- lanes taken in the order of their priority, and each channel's limits.
CREATE OR REPLACE FUNCTION pgrelay._claim(p_processor bigint, p_mode text, p_leader bool, p_limit int,
                               p_kinds text[] DEFAULT '{sql}', p_term bigint DEFAULT NULL,
                               p_direct bool DEFAULT false, p_direct_kinds text[] DEFAULT '{}')
  RETURNS TABLE (id bigint, origin_id bigint, channel text, payload text, attempt int,
                 enqueued_at timestamptz, dispatched_at timestamptz, expired bool, kind text,
                 handler text, concurrency_mode text, timeout_ms bigint, max_attempts int)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_bitmapscan = off
SET enable_seqscan = off
SET jit = off
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
  v_cap int;
  v_full text[] := '{}';
  v_pass int;
  v_start bigint;
  v_lanes bigint[];
  v_first bigint[];
  v_lane bigint;
  v_limited bool;
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
       ORDER BY c.priority DESC, pg_catalog.random()
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
            CROSS JOIN LATERAL (
              SELECT l.lane, q.priority, q.origin_id, q.id
                FROM pgrelay._lane_head(ch.channel, l.lane, v_node, v_all, v_own) h
                JOIN pgrelay.queue q ON q.id = h.id) y;
        END IF;
      END IF;

      v_n := 0;
      FOREACH v_lane IN ARRAY COALESCE(v_lanes, '{}') LOOP
        -- v_left is only brought down after the loop: bound by both here, or
        -- a serialised channel visited last takes a full share of what is left.
        EXIT WHEN v_n >= v_cap;
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
      IF ch.rate_limit IS NOT NULL THEN
        PERFORM pgrelay._claim_started(ch.channel, v_n);
      END IF;
      v_left := v_left - v_n;
    END LOOP;
    EXIT WHEN v_left <= 0 OR pg_catalog.cardinality(v_full) = 0;
  END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION pgrelay._claim_channel(p_processor bigint, p_mode text, p_leader bool, p_limit int,
                                       p_channel text, p_kinds text[], p_term bigint DEFAULT NULL,
                                       p_direct bool DEFAULT false, p_direct_kinds text[] DEFAULT '{}')
  RETURNS TABLE (id bigint, origin_id bigint, channel text, payload text, attempt int,
                 enqueued_at timestamptz, dispatched_at timestamptz, expired bool, kind text,
                 handler text, concurrency_mode text, timeout_ms bigint, max_attempts int)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
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

-- Direct batches: a limited channel is not theirs; a 'none' channel with
-- priorities takes its rows in their order.
CREATE OR REPLACE FUNCTION pgrelay._claim_direct(p_channel text, p_mode text, p_leader bool, p_term bigint,
                                                 p_limit int, p_kinds text[] DEFAULT '{sql}')
  RETURNS TABLE (id bigint, origin_id bigint, payload text, attempt int, enqueued_at timestamptz,
                 expired bool, handler text, timeout_ms bigint, max_attempts int, kind text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
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
   WHERE c.channel = p_channel AND c.kind IN ('sql', 'go') AND c.concurrency_mode = 'none' AND NOT c.paused
     AND c.max_in_flight IS NULL AND c.rate_limit IS NULL
     AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_kinds);
  IF NOT FOUND OR p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  IF pgrelay._claim_prioritised(p_channel) THEN
    RETURN QUERY
    SELECT q.id, q.origin_id, q.payload, q.attempt, q.enqueued_at, COALESCE(q.expires_at <= now(), false),
           ch.handler, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint, ch.max_attempts, ch.kind
      FROM pgrelay.queue q
     WHERE q.id = ANY (ARRAY(SELECT pgrelay._claim_pick(p_channel, v_node, v_all, v_own, p_limit)))
     ORDER BY q.priority DESC, q.not_before, q.id;
    RETURN;
  END IF;
  RETURN QUERY
  SELECT q.id, q.origin_id, q.payload, q.attempt, q.enqueued_at, COALESCE(q.expires_at <= now(), false),
         ch.handler, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint, ch.max_attempts, ch.kind
    FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
   ORDER BY q.not_before, q.id
   LIMIT p_limit
     FOR UPDATE OF q SKIP LOCKED;
END
$$;

CREATE OR REPLACE FUNCTION pgrelay._ready_direct(p_mode text, p_leader bool, p_kinds text[])
  RETURNS TABLE (channel text, kind text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
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
  SELECT c.channel, c.kind FROM pgrelay.channels c
   CROSS JOIN LATERAL (
     SELECT 1 FROM pgrelay.queue q
      WHERE q.channel = c.channel AND q.dispatched_at IS NULL AND q.not_before <= now()
        AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
      ORDER BY q.not_before, q.id
      LIMIT 1) r
   WHERE c.kind IN ('sql', 'go') AND c.concurrency_mode = 'none' AND NOT c.paused
     AND c.max_in_flight IS NULL AND c.rate_limit IS NULL
     AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_kinds);
  IF NOT 'sql' = ANY (p_kinds) THEN
    RETURN;
  END IF;
  -- Any ready lane row will do: a hint, checked by the lane batch itself.
  RETURN QUERY
  SELECT ''::text, 'sql'::text FROM pgrelay.queue q
   WHERE q.dispatched_at IS NULL AND q.lane IS NOT NULL AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
     AND EXISTS (SELECT FROM pgrelay.channels c
                  WHERE c.channel = q.channel AND c.kind = 'sql' AND NOT c.paused
                    AND c.concurrency_mode IN ('channel', 'payload')
                    AND c.max_in_flight IS NULL AND c.rate_limit IS NULL)
   LIMIT 1;
END
$$;

-- _claim_lanes_direct: as in 0001, but a limited channel's lanes are not a
-- batch's.
CREATE OR REPLACE FUNCTION pgrelay._claim_lanes_direct(p_mode text, p_leader bool, p_term bigint, p_limit int,
                                                       p_after_channel text, p_after_lane bigint)
  RETURNS TABLE (id bigint, origin_id bigint, channel text, lane bigint, payload text, attempt int,
                 enqueued_at timestamptz, expired bool, handler text, timeout_ms bigint, max_attempts int)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_bitmapscan = off
SET enable_seqscan = off
SET jit = off
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
               OR ch.concurrency_mode NOT IN ('channel', 'payload')
               OR ch.max_in_flight IS NOT NULL OR ch.rate_limit IS NOT NULL;
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

REVOKE ALL ON FUNCTION pgrelay._claim_allowance(pgrelay.channels, int, bool, bool, int),
  pgrelay._claim_started(text, int),
  pgrelay._claim_pick(text, int, bool, bool, int),
  pgrelay._claim_prioritised(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._claim_allowance(pgrelay.channels, int, bool, bool, int),
  pgrelay._claim_started(text, int),
  pgrelay._claim_pick(text, int, bool, bool, int),
  pgrelay._claim_prioritised(text)
  TO pgrelay_processor;
