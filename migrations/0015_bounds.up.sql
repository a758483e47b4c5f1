-- 0015: upper bounds on channel settings, reserved NATS subjects, and a
-- positive p_dead_after for decommission().
--
-- 1. Channel settings have upper bounds, each refused with the SQLSTATE of
--    its field and a message naming the bound:
--
--      max_attempts  <= 1000      PR013
--      timeout       <= 24 hours  PR014
--      retry_delay   <= 24 hours  PR015
--      expire_after  <= 365 days  PR016
--
--    Why these:
--    * timeout becomes the handler's statement_timeout, an int of
--      milliseconds (at most 2^31-1 ms, about 24.8 days: a larger value
--      fails every attempt of the channel), and a Go time.Duration in the
--      Processor (overflows at about 292 years); a direct batch's deadline
--      adds up the timeouts of its events. 24 hours is far beyond any
--      handler an outbox should run inside a transaction, and 24 h x the
--      largest batch stays far from the Duration's limit.
--    * retry_delay feeds _backoff(): retry_delay x 2^min(attempt-1, 20),
--      capped at max(retry_delay, 1 hour), x 0.8-1.2 jitter. The product is
--      computed before the cap: at 24 hours it is 24 h x 2^20, about 2 900
--      years, well inside an interval (about 178 million years; its time
--      part is int64 microseconds, about 292 000 years), and the backoff
--      is at most 28.8 hours. Without a bound, a retry_delay of a few
--      thousand years overflowed the interval in _complete() and failed
--      the Processor's whole completion batch, at every try.
--    * max_attempts: the exponent of _backoff is capped at 20, so attempts
--      cannot overflow it; the bound keeps an event from being retried
--      (and logged) forever. 1000 attempts at the 1 hour cap retry for more
--      than a month.
--    * expire_after is added to the enqueue (or due) time; 365 days keeps
--      expires_at finite and is longer than any event is worth delivering;
--      NULL (or update()'s '0') still means "never expires". '1 year'
--      compares as 360 days and is accepted.
--
--    Intervals compare as PostgreSQL compares them ('1 day' = '24 hours',
--    '1 mon' = 30 days). Channels stored before this migration outside the
--    bounds are left as they are: a stored value is held to its bound only
--    when it is given anew — register() of a new channel or with another
--    value, update() of that field. An identical register() (a deployment
--    script) stays a no-op and update(p_paused := ...) still works, as it
--    does for a handler whose function was dropped. The migration warns of
--    each such channel.
--
-- 2. A nats channel's subject may not be in a namespace NATS keeps for
--    itself: subjects starting with "$" ($JS.API. reaches the JetStream API
--    — a message there can delete a stream —, $KV. and $O. the key-value
--    and object stores, $SYS. the system account; NATS reserves every "$"
--    subject for system use), and "_INBOX" or below it (the reply inboxes
--    of NATS clients). As events.CheckChannelSubject, which the nats handler
--    applies again before it publishes. PR017, like the other subject
--    rules; checked when the handler or the kind is given (as before).
--
-- 3. decommission() refuses a p_dead_after that is NULL, zero or negative
--    (PR023): with it every node counted as silent long enough, and a live
--    node was decommissioned (its pinned rows discarded) while its
--    Processors ran. NULL made the liveness test NULL, which passed too.

-- ---------------------------------------------------------------------------
-- _check_channel: 0007's, with the bounds and the reserved subjects.
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

-- Channels already outside the new rules keep working (see 1.); say which.
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN
    SELECT x.channel,
           pg_catalog.concat_ws(', ',
             CASE WHEN x.max_attempts > 1000 THEN pg_catalog.format('max_attempts %s > 1000', x.max_attempts) END,
             CASE WHEN x.timeout > interval '24 hours' THEN pg_catalog.format('timeout %s > 24 hours', x.timeout) END,
             CASE WHEN x.retry_delay > interval '24 hours' THEN pg_catalog.format('retry_delay %s > 24 hours', x.retry_delay) END,
             CASE WHEN x.expire_after > interval '365 days' THEN pg_catalog.format('expire_after %s > 365 days', x.expire_after) END,
             CASE WHEN x.kind = 'nats' AND x.handler ~ '^(\$|_INBOX(\.|$))'
                  THEN pg_catalog.format('reserved NATS subject %s (the nats handler refuses to publish to it)',
                                         pg_catalog.quote_literal(x.handler)) END) AS why
      FROM pgrelay.channels x
     WHERE x.max_attempts > 1000 OR x.timeout > interval '24 hours' OR x.retry_delay > interval '24 hours'
        OR x.expire_after > interval '365 days' OR (x.kind = 'nats' AND x.handler ~ '^(\$|_INBOX(\.|$))')
     ORDER BY x.channel
  LOOP
    RAISE WARNING 'pgrelay: channel % is outside the bounds of migration 0015: %', r.channel, r.why
      USING HINT = 'Bring it within with pgrelay.update(); a new value outside them is refused.';
  END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- decommission: 0012's, refusing a p_dead_after that is not positive.
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pgrelay.decommission(p_node int, p_dead_after interval DEFAULT '1 minute')
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
