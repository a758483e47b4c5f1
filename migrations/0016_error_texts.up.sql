-- 0016: what NATS subscribers learn of a failure.
--
-- The event documents published on NATS (docs/events.md) carried the full
-- error text of a failure even for channels that keep their payloads off
-- the bus, and an error text can hold payload fragments (a handler's
-- exception message), recipients or the SMTP host. A channel now says what
-- of its errors goes to NATS, in channels.publish_errors:
--   class  error_class only, a class of the error (smtp_5xx, timeout, sqlstate_23505, ...;
--          no free text). The default, for existing channels too.
--   text   error_class and the full error text (as before).
--   none   neither (error null, no error_class).
-- The class is derived by the publisher from the text (events.ErrorClass);
-- pgrelay.log keeps the full text for the operators who may read it.
--
-- register(), update() and pgrelay_notifier.create_channel() gain
-- p_publish_errors. A parameter changes a function's signature: the old
-- ones are dropped (an overload beside them would make calls ambiguous) and
-- their grants and owners given again. _check_channel validates the value.

ALTER TABLE pgrelay.channels ADD COLUMN publish_errors text NOT NULL DEFAULT 'class';

-- ---------------------------------------------------------------------------
-- _check_channel: 0015's, with publish_errors (PR018).
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pgrelay._check_channel(c pgrelay.channels, p_check_handler bool DEFAULT true) RETURNS void
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

-- ---------------------------------------------------------------------------
-- register, update: 0010's, with p_publish_errors. register() stays a no-op
-- for an identical definition and names publish_errors when it differs.
-- ---------------------------------------------------------------------------

DROP FUNCTION pgrelay_notifier.create_channel(text, text, text, bool, bool, int, interval, interval, interval, bool);
DROP FUNCTION pgrelay.register(text, text, text, text, bool, bool, int, interval, interval, interval, bool);
DROP FUNCTION pgrelay.update(text, text, text, text, bool, bool, int, interval, interval, interval, bool, bool);

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

-- create_channel: 0014's, passing p_publish_errors through.
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
  p_publish_errors text DEFAULT 'class'
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
    p_publish_errors := p_publish_errors);
END
$$;

REVOKE ALL ON FUNCTION
  pgrelay.register(text, text, text, text, bool, bool, int, interval, interval, interval, bool, text),
  pgrelay.update(text, text, text, text, bool, bool, int, interval, interval, interval, bool, bool, text),
  pgrelay_notifier.create_channel(text, text, text, bool, bool, int, interval, interval, interval, bool, text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  pgrelay.register(text, text, text, text, bool, bool, int, interval, interval, interval, bool, text),
  pgrelay.update(text, text, text, text, bool, bool, int, interval, interval, interval, bool, bool, text)
  TO pgrelay_admin;

-- As in 0004: the notifier role owns create_channel (CREATE on the schema
-- lent for the transfer only); admins run it.
GRANT CREATE ON SCHEMA pgrelay_notifier TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.create_channel(text, text, text, bool, bool, int, interval, interval, interval, bool, text)
  OWNER TO pgrelay_notifier;
REVOKE CREATE ON SCHEMA pgrelay_notifier FROM pgrelay_notifier;
GRANT EXECUTE ON FUNCTION
  pgrelay_notifier.create_channel(text, text, text, bool, bool, int, interval, interval, interval, bool, text)
  TO pgrelay_admin;
