-- 0007: the producer functions stamp their rows themselves; checks aligned
-- with what the Go side accepts; the statistics functions run as the caller.

-- ---------------------------------------------------------------------------
-- notify(), notify_many() and the deduplicating insert stamp every derived
-- column themselves.
--
-- The BEFORE INSERT trigger (_queue_before_insert) derives origin_id,
-- run_in_node, lane, phash and expires_at. It is an ordinary trigger: it does
-- not fire under session_replication_role = replica (the apply worker of
-- logical replication, or a companion's replication-aware trigger calling
-- notify() there), where origin_id would stay NULL and the insert fail, and
-- the pin, the lane, the dedup hash and the expiry would be missing. So the
-- producer functions now write each of them as the trigger would, from the
-- channel they already read. The trigger stays, for direct inserts and retry
-- rows; where it fires it works the same values out again and leaves them
-- as they are (origin_id = id, the pin, the lane and the hash are computed
-- the same way; expires_at is set only where it is NULL, and now() is the
-- row's enqueued_at).
--
-- The statement-level trigger that keeps the payloads of publish_payload
-- channels (_queue_keep_payloads, 0003) is ordinary too: under the replica
-- role these functions keep the payload themselves.
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pgrelay.notify(p_channel text, p_payload text) RETURNS bigint
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
  v_id := pgrelay._next_id();
  -- The columns _queue_before_insert derives, as it derives them (phash is
  -- NULL: the channel does not deduplicate).
  INSERT INTO pgrelay.queue (id, origin_id, channel, payload, run_in_node, lane, expires_at)
  VALUES (v_id, v_id, p_channel, p_payload,
          CASE WHEN ch.node_restricted THEN pgrelay._this_node() END,
          CASE ch.concurrency_mode
            WHEN 'channel' THEN 0
            WHEN 'payload' THEN pg_catalog.hashtextextended(p_payload, 0)
          END,
          now() + ch.expire_after);
  IF ch.publish_payload AND pg_catalog.current_setting('session_replication_role') = 'replica' THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload) VALUES (v_id, p_payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  RETURN v_id;
END
$$;

-- notify_many: one set-based insert, as before; the node id and the expiry
-- are worked out once per call.
CREATE OR REPLACE FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[]) RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  p text;
  v_ids bigint[];
  v_node int;
  v_expires timestamptz;
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
  v_ids := pgrelay._next_ids(COALESCE(pg_catalog.cardinality(p_payloads), 0));
  IF ch.node_restricted THEN
    v_node := pgrelay._this_node();
  END IF;
  v_expires := now() + ch.expire_after;
  RETURN QUERY
  WITH ins AS (
    INSERT INTO pgrelay.queue (id, origin_id, channel, payload, run_in_node, lane, expires_at)
    SELECT v_ids[u.n], v_ids[u.n], p_channel, u.payload, v_node,
           CASE ch.concurrency_mode
             WHEN 'channel' THEN 0
             WHEN 'payload' THEN pg_catalog.hashtextextended(u.payload, 0)
           END,
           v_expires
      FROM pg_catalog.unnest(p_payloads) WITH ORDINALITY AS u(payload, n)
     ORDER BY u.n
    RETURNING id
  )
  SELECT ins.id FROM ins ORDER BY ins.id;
  IF ch.publish_payload AND pg_catalog.current_setting('session_replication_role') = 'replica' THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload)
    SELECT v_ids[u.n], u.payload FROM pg_catalog.unnest(p_payloads) WITH ORDINALITY AS u(payload, n)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
END
$$;

-- _enqueue_dedup: as in 0005; the row it inserts carries its derived columns.
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
     FOR KEY SHARE SKIP LOCKED;
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

-- ---------------------------------------------------------------------------
-- A nats channel's subject: as events.ValidSubject, and not under pgrelay.
--
-- Tokens are refused for what Go's events.ValidToken refuses: '.', '*', '>',
-- and every character up to U+0020 and DEL (the 0001 pattern refused only
-- whitespace among them). A subject under "pgrelay." is refused too: the
-- events stream captures pgrelay.>, so the channel's messages would land
-- among pgrelay's own status events. The rest is _check_channel of 0001.
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pgrelay._check_channel(c pgrelay.channels, p_check_handler bool DEFAULT true) RETURNS void
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
    IF c.handler !~ '^[^\x01-\x20\x7f.*>]+(\.[^\x01-\x20\x7f.*>]+)*$' THEN
      RAISE EXCEPTION 'pgrelay: channel %: % is not a valid NATS subject (dot-separated tokens, no spaces, control characters or wildcards)',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017';
    END IF;
    IF c.handler ~ '^pgrelay\.' THEN
      RAISE EXCEPTION 'pgrelay: channel %: subject % is under "pgrelay.", where pgrelay publishes its own events',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017',
        HINT = 'The events stream captures pgrelay.>; choose a subject outside it, e.g. app.orders.';
    END IF;
  END IF;
END
$$;

-- ---------------------------------------------------------------------------
-- queue_stats() and nodes_overview() run as their caller.
--
-- They were SECURITY DEFINER, but each role granted EXECUTE on them
-- (pgrelay_admin, pgrelay_processor) may already SELECT everything they read:
-- channels and queue (queue_stats, including the EXPLAIN of its estimate),
-- nodes, queue and processors (nodes_overview). Running as the owner gave
-- nothing but a wider grant than needed.
-- ---------------------------------------------------------------------------

ALTER FUNCTION pgrelay.queue_stats() SECURITY INVOKER;
ALTER FUNCTION pgrelay.nodes_overview(interval) SECURITY INVOKER;

-- queue_stats() estimates a channel past 100 000 pending rows with an EXPLAIN,
-- which PostgreSQL refuses in a STABLE function ("EXPLAIN is not allowed in a
-- non-volatile function"): the estimate failed the whole call. VOLATILE lets
-- it run.
ALTER FUNCTION pgrelay.queue_stats() VOLATILE;

-- ---------------------------------------------------------------------------
-- The notifier's address check: domain literals as net/mail reads them.
--
-- The email handler builds messages with go-mail, which parses every address
-- with Go's net/mail.ParseAddress. That accepts a domain literal only when
-- its text is an IP address net.ParseIP reads: a dotted IPv4 address (no
-- leading zeros) or a plain IPv6 address (no "IPv6:" tag, no zone). The 0004
-- pattern accepted any dtext ("[IPv6:::1]", "[host]"), so such an email was
-- stored and then failed for good when sent. The rest is 0004's check.
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pgrelay_notifier._check_address(p_field text, p_addr text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  -- RFC 5322 3.2.3 atext, 3.2.4 quoted-string (qtext / quoted-pair, spaces
  -- allowed).
  atext  constant text := '[A-Za-z0-9!#$%&''*+/=?^_`{|}~-]';
  quoted constant text := '"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"';
  -- IP addresses as Go's netip.ParseAddr reads them (RFC 3986's IPv6address
  -- grammar; IPv4 octets without leading zeros).
  h16    constant text := '[0-9A-Fa-f]{1,4}';
  dec    constant text := '(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])';
  v_ipv4 text := dec || '(?:\.' || dec || '){3}';
  v_ls32 text := '(?:' || h16 || ':' || h16 || '|' || v_ipv4 || ')';
  v_ipv6 text := '(?:(?:' || h16 || ':){6}' || v_ls32
    || '|::(?:' || h16 || ':){5}' || v_ls32
    || '|(?:' || h16 || ')?::(?:' || h16 || ':){4}' || v_ls32
    || '|(?:(?:' || h16 || ':){0,1}' || h16 || ')?::(?:' || h16 || ':){3}' || v_ls32
    || '|(?:(?:' || h16 || ':){0,2}' || h16 || ')?::(?:' || h16 || ':){2}' || v_ls32
    || '|(?:(?:' || h16 || ':){0,3}' || h16 || ')?::' || h16 || ':' || v_ls32
    || '|(?:(?:' || h16 || ':){0,4}' || h16 || ')?::' || v_ls32
    || '|(?:(?:' || h16 || ':){0,5}' || h16 || ')?::' || h16
    || '|(?:(?:' || h16 || ':){0,6}' || h16 || ')?::)';
  v_local  text := '(?:' || atext || '+(?:\.' || atext || '+)*|' || quoted || ')';
  v_domain text := '(?:' || atext || '+(?:\.' || atext || '+)*|\[(?:' || v_ipv4 || '|' || v_ipv6 || ')\])';
  -- A display name: words (atoms, which may contain '.' as RFC 5322's
  -- obs-phrase allows, or quoted strings) separated by blanks.
  v_word   text := '(?:(?:' || atext || '|[.]|[^\x01-\x7f])+|' || quoted || ')';
  v_addr   text;
  m        text[];
BEGIN
  IF p_addr IS NULL THEN
    RAISE EXCEPTION 'pgrelay_notifier: % address is NULL', p_field USING ERRCODE = 'PR102';
  END IF;
  m := pg_catalog.regexp_match(p_addr,
         '^[ \t]*(?:' || v_word || '(?:[ \t]+' || v_word || ')*[ \t]*)?<(' || v_local || '@' || v_domain || ')>[ \t]*$');
  IF m IS NOT NULL THEN
    v_addr := m[1];
  ELSIF p_addr ~ ('^' || v_local || '@' || v_domain || '$') THEN
    v_addr := p_addr;
  ELSE
    RAISE EXCEPTION 'pgrelay_notifier: % address % is not a valid RFC 5322 address', p_field,
      pg_catalog.quote_literal(p_addr) USING ERRCODE = 'PR102',
      HINT = 'Write local@domain or "Display Name <local@domain>"; a domain literal must be an IP address, e.g. [192.0.2.1].';
  END IF;
  IF pg_catalog.octet_length(v_addr) > 254
     OR pg_catalog.octet_length(pg_catalog.substr(v_addr, 1,
          pg_catalog.length(v_addr) - pg_catalog.strpos(pg_catalog.reverse(v_addr), '@'))) > 64 THEN
    RAISE EXCEPTION 'pgrelay_notifier: % address % is too long (RFC 5321: at most 64 octets before the "@", 254 in all)',
      p_field, pg_catalog.quote_literal(p_addr) USING ERRCODE = 'PR102';
  END IF;
END
$$;
