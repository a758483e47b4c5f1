-- _check_channel: the checks every channel definition passes, at register,
-- update and create_channel: its name, kind, concurrency mode, handler and
-- settings. A 'go' channel's handler is a name: 1 to 100 letters, digits,
-- '_', '.' or '-', starting with a letter or '_' (PR017).

CREATE OR REPLACE FUNCTION pgrelay._check_channel(c pgrelay.channels, p_check_handler boolean DEFAULT true) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
$_$;

REVOKE ALL ON FUNCTION pgrelay._check_channel(pgrelay.channels, boolean) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
