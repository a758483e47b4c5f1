-- Go handlers: channels of kind 'go' name a handler that a Go program
-- embedding the Processor provides (pgrelay.NewProcessor, Handle, HandleTx;
-- docs/go.md). A Processor claims the events of a go channel only when it has
-- a function under the channel's handler name: events of a name no Processor
-- has wait (pending, no attempt spent), and pgrelay.unhandled_go_channels()
-- says which (`pgrelay stats` prints it). _claim visits the channels whose
-- _claim_kind is in its p_kinds ('go:<name>' for each Go handler a Processor
-- has): migration 0009 replaces it, with the direct batches' kinds.

-- The kind check of the table and of _check_channel accept 'go'.
ALTER TABLE pgrelay.channels DROP CONSTRAINT channels_kind;
ALTER TABLE pgrelay.channels ADD CONSTRAINT channels_kind CHECK (kind IN ('sql', 'email', 'nats', 'go'));

-- _claim_kind: what a channel is claimed by in _claim's p_kinds: its kind,
-- but 'go:' || handler for a go channel, so that a Processor names each Go
-- handler it has ('go:charge') and is offered only their channels. The one
-- place of that rule. Inlined into _claim's channel queries (LANGUAGE sql, an
-- SQL standard body bound when created under pgrelay's search_path, no SET
-- clause), as _may_take is.
CREATE FUNCTION pgrelay._claim_kind(p_kind text, p_handler text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_kind = 'go' THEN 'go:' || p_handler ELSE p_kind END;

-- _check_channel: as in 0001, and kind 'go', whose handler is a name: 1 to
-- 100 letters, digits, '_', '.' or '-', starting with a letter or '_' (PR017).
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
  IF c.kind IS NULL OR c.kind NOT IN ('sql', 'email', 'nats', 'go') THEN
    RAISE EXCEPTION 'pgrelay: channel %: unknown kind % (expected sql, email, nats or go)',
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
  ELSIF c.kind = 'go' THEN
    -- The name of a Go handler: the program embedding the Processor
    -- registers a function under it (Handle, HandleTx).
    IF c.handler !~ '^[A-Za-z_][A-Za-z0-9_.-]{0,99}$' THEN
      RAISE EXCEPTION 'pgrelay: channel %: % is not a valid Go handler name (1 to 100 letters, digits, "_", "." or "-", starting with a letter or "_")',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017',
        HINT = 'Example: charge_card, with Handle("charge_card", ...) in the program.';
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

-- go_handlers: the Go handler names of each running Processor of this node,
-- written by the Processor as it starts (_go_handlers_set). Node-local (every
-- node's Processors claim what their node may take; the stats of a node speak
-- of its own Processors) and not needed by the claim: it only tells operators
-- why a go channel's events wait. Rows of Processors that are gone from
-- pgrelay.processors mean nothing and are deleted by the next start.
CREATE TABLE pgrelay.go_handlers (
  processor_id bigint NOT NULL,
  handler      text NOT NULL,
  PRIMARY KEY (processor_id, handler)
);

-- _go_handlers_set: records the Go handler names of Processor p_processor
-- (replacing what it recorded before) and deletes the rows of Processors no
-- longer in pgrelay.processors.
CREATE FUNCTION pgrelay._go_handlers_set(p_processor bigint, p_handlers text[]) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  DELETE FROM pgrelay.go_handlers g
   WHERE g.processor_id = p_processor
      OR NOT EXISTS (SELECT FROM pgrelay.processors p WHERE p.processor_id = g.processor_id);
  INSERT INTO pgrelay.go_handlers (processor_id, handler)
  SELECT DISTINCT p_processor, h FROM unnest(COALESCE(p_handlers, '{}'::text[])) AS h
   WHERE h IS NOT NULL;
END
$$;

-- unhandled_go_channels: the go channels whose handler no running Processor
-- of this node has (none in pgrelay.processors recorded the name): their
-- events wait, pending, until one that has it starts. pending counts them
-- as queue_stats() does not: exactly, since such a backlog is what to look
-- at (read through queue_ready).
CREATE FUNCTION pgrelay.unhandled_go_channels()
RETURNS TABLE (channel text, handler text, pending bigint)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT c.channel, c.handler,
         (SELECT count(*) FROM pgrelay.queue q WHERE q.channel = c.channel AND q.dispatched_at IS NULL)
    FROM pgrelay.channels c
   WHERE c.kind = 'go'
     AND NOT EXISTS (SELECT FROM pgrelay.go_handlers g JOIN pgrelay.processors p
                              ON p.processor_id = g.processor_id
                      WHERE g.handler = c.handler)
   ORDER BY c.channel
$$;

-- _retry_after: a Go handler's RetryAfter(d, err): the event's attempt
-- p_ids[i] was just completed as failed (_complete, in the caller's
-- transaction), which enqueued its retry after the channel's backoff; the
-- retry is due after p_delays[i] instead. The retry is the row that is
-- retry_of the failed one (found through origin_id, indexed); when the
-- attempt was the last (gave_up) there is none. Returns the number of
-- retries moved.
CREATE FUNCTION pgrelay._retry_after(p_ids bigint[], p_origin_ids bigint[], p_delays interval[])
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n int;
BEGIN
  UPDATE pgrelay.queue q
     SET not_before = now() + o.delay
    FROM unnest(p_ids, p_origin_ids, p_delays) AS o(id, origin_id, delay)
   WHERE q.origin_id = o.origin_id AND q.retry_of = o.id AND q.dispatched_at IS NULL
     AND o.delay IS NOT NULL AND o.delay >= interval '0';
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

REVOKE ALL ON pgrelay.go_handlers FROM PUBLIC;
REVOKE ALL ON FUNCTION pgrelay._claim_kind(text, text), pgrelay._go_handlers_set(bigint, text[]),
  pgrelay.unhandled_go_channels(), pgrelay._retry_after(bigint[], bigint[], interval[]) FROM PUBLIC;

GRANT SELECT ON pgrelay.go_handlers TO pgrelay_admin;
GRANT SELECT, INSERT, DELETE ON pgrelay.go_handlers TO pgrelay_processor;
GRANT EXECUTE ON FUNCTION pgrelay._claim_kind(text, text), pgrelay.unhandled_go_channels()
  TO pgrelay_admin, pgrelay_processor;
GRANT EXECUTE ON FUNCTION pgrelay._go_handlers_set(bigint, text[]),
  pgrelay._retry_after(bigint[], bigint[], interval[])
  TO pgrelay_processor;
