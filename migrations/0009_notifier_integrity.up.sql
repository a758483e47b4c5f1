-- 0009: the notifier's integrity.
--
-- 1. An email event whose notification does not exist on this node is never
--    taken for done: start_sending() says 'missing' and the handler retries
--    the event with the channel's backoff (the notification may not have
--    replicated yet), then gives up naming the notification.
-- 2. One send() is delivered at most once, whatever events point at it. The
--    move queued -> sending is the gate: start_sending() records which event
--    (its origin_id) won it, in sending_event; only that event's attempts
--    send; any other event ends without sending and the reason says so. An
--    event only sends a notification created for its own channel.
-- 3. Size limits in send(): the subject, display names, the number and size
--    of custom headers, and the whole message.
--
-- fetch(), set_status() and debug_log() keep their signatures and meaning;
-- the handler now calls start_sending() (the gate, then fetch()) and
-- fail_for_event() (a failure that only touches a notification the event may
-- still send).

ALTER TABLE pgrelay_notifier.notifications ADD COLUMN sending_event bigint NULL;
COMMENT ON COLUMN pgrelay_notifier.notifications.sending_event IS
  'origin_id of the queue event that moved the notification from queued to sending: only its attempts send it';

-- ---------------------------------------------------------------------------
-- Limits
-- ---------------------------------------------------------------------------

-- _check_address: 0007's check, and a display name of at most 256 bytes.
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
  v_name   text;
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
  IF m IS NOT NULL THEN
    -- The display name: what precedes "<addr-spec>" (and the blanks after it).
    v_name := pg_catalog.rtrim(p_addr, E' \t');
    v_name := pg_catalog.btrim(pg_catalog.substr(v_name, 1,
                pg_catalog.length(v_name) - pg_catalog.length(v_addr) - 2), E' \t');
    IF pg_catalog.octet_length(v_name) > 256 THEN
      RAISE EXCEPTION 'pgrelay_notifier: the display name of % address <%> is % bytes, over the limit of 256',
        p_field, v_addr, pg_catalog.octet_length(v_name) USING ERRCODE = 'PR102';
    END IF;
  END IF;
END
$$;

-- _check_headers: 0004's check, and at most 50 custom headers of at most
-- 16 KiB (16 384 bytes) of names and values together.
CREATE OR REPLACE FUNCTION pgrelay_notifier._check_headers(p_headers jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  k text;
  v jsonb;
  v_n int := 0;
  v_bytes bigint := 0;
BEGIN
  IF p_headers IS NULL THEN
    RETURN;
  END IF;
  IF pg_catalog.jsonb_typeof(p_headers) <> 'object' THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: headers must be a JSON object, got %',
      pg_catalog.jsonb_typeof(p_headers) USING ERRCODE = 'PR105';
  END IF;
  FOR k, v IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(p_headers) e LOOP
    IF k !~ '^[\x21-\x39\x3b-\x7e]{1,76}$' THEN
      RAISE EXCEPTION 'pgrelay_notifier.send: header name % is invalid (1 to 76 printable ASCII characters, no ":")',
        pg_catalog.quote_literal(k) USING ERRCODE = 'PR105';
    END IF;
    IF pg_catalog.lower(k) IN ('from', 'to', 'cc', 'bcc', 'subject', 'date', 'message-id',
                               'mime-version', 'content-type', 'content-transfer-encoding',
                               'sender', 'return-path') THEN
      RAISE EXCEPTION 'pgrelay_notifier.send: header % is set by the notifier and cannot be given in p_headers',
        pg_catalog.quote_literal(k) USING ERRCODE = 'PR105';
    END IF;
    IF pg_catalog.jsonb_typeof(v) <> 'string' THEN
      RAISE EXCEPTION 'pgrelay_notifier.send: header % must have a string value, got %',
        pg_catalog.quote_literal(k), pg_catalog.jsonb_typeof(v) USING ERRCODE = 'PR105';
    END IF;
    IF (v #>> '{}') ~ '[\r\n]' OR pg_catalog.octet_length(v #>> '{}') > 900 THEN
      RAISE EXCEPTION 'pgrelay_notifier.send: the value of header % contains CR or LF or is over 900 bytes',
        pg_catalog.quote_literal(k) USING ERRCODE = 'PR105';
    END IF;
    v_n := v_n + 1;
    v_bytes := v_bytes + pg_catalog.octet_length(k) + pg_catalog.octet_length(v #>> '{}');
  END LOOP;
  IF v_n > 50 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: % custom headers, over the limit of 50', v_n
      USING ERRCODE = 'PR105';
  END IF;
  IF v_bytes > 16384 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the custom headers are % bytes (names and values), over the limit of 16384',
      v_bytes USING ERRCODE = 'PR105';
  END IF;
END
$$;

-- send: 0004's checks, and the subject at most 998 bytes (PR103) and the
-- whole message at most 2 MiB (PR108): the From, every address, the
-- subject, both bodies and the custom headers' names and values together,
-- counted in bytes as stored (octet_length). What goes on the wire is
-- larger: the bodies are encoded (quoted-printable or base64).
CREATE OR REPLACE FUNCTION pgrelay_notifier.send(
  p_channel text,
  p_to text[],
  p_subject text,
  p_body_text text,
  p_body_html text DEFAULT NULL,
  p_cc text[] DEFAULT NULL,
  p_bcc text[] DEFAULT NULL,
  p_headers jsonb DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_from text;
  v_n int;
  v_size bigint;
  v_id bigint;
BEGIN
  SELECT c.handler INTO v_from FROM pgrelay.channels c WHERE c.channel = p_channel AND c.kind = 'email';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: % is not an email channel', COALESCE(pg_catalog.quote_literal(p_channel), 'NULL')
      USING ERRCODE = 'PR100', HINT = 'Create it with pgrelay_notifier.create_channel(channel, from_address).';
  END IF;
  IF p_to IS NULL OR COALESCE(pg_catalog.cardinality(p_to), 0) = 0 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the recipient list (p_to) is empty' USING ERRCODE = 'PR101';
  END IF;
  PERFORM pgrelay_notifier._check_addresses('to', p_to);
  PERFORM pgrelay_notifier._check_addresses('cc', p_cc);
  PERFORM pgrelay_notifier._check_addresses('bcc', p_bcc);
  v_n := pg_catalog.cardinality(p_to) + COALESCE(pg_catalog.cardinality(p_cc), 0)
         + COALESCE(pg_catalog.cardinality(p_bcc), 0);
  IF v_n > 100 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: % recipients, over the limit of 100 per email', v_n
      USING ERRCODE = 'PR106';
  END IF;
  IF p_subject IS NULL THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the subject is NULL (use an empty string)' USING ERRCODE = 'PR103';
  END IF;
  IF pg_catalog.strpos(p_subject, E'\r') > 0 OR pg_catalog.strpos(p_subject, E'\n') > 0 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the subject % contains CR or LF', pg_catalog.quote_literal(p_subject)
      USING ERRCODE = 'PR103';
  END IF;
  IF pg_catalog.octet_length(p_subject) > 998 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the subject is % bytes, over the limit of 998',
      pg_catalog.octet_length(p_subject) USING ERRCODE = 'PR103';
  END IF;
  IF p_body_text IS NULL THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the text body is NULL (use an empty string)' USING ERRCODE = 'PR107';
  END IF;
  IF pg_catalog.octet_length(p_body_text) > 1048576 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the text body is % bytes, over the 1 MiB (1048576 bytes) limit',
      pg_catalog.octet_length(p_body_text) USING ERRCODE = 'PR104';
  END IF;
  IF pg_catalog.octet_length(p_body_html) > 1048576 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the HTML body is % bytes, over the 1 MiB (1048576 bytes) limit',
      pg_catalog.octet_length(p_body_html) USING ERRCODE = 'PR104';
  END IF;
  PERFORM pgrelay_notifier._check_headers(p_headers);
  v_size := pg_catalog.octet_length(v_from) + pg_catalog.octet_length(p_subject)
            + pg_catalog.octet_length(p_body_text) + COALESCE(pg_catalog.octet_length(p_body_html), 0)
            + (SELECT COALESCE(sum(pg_catalog.octet_length(a)), 0)
                 FROM unnest(p_to || COALESCE(p_cc, '{}'::text[]) || COALESCE(p_bcc, '{}'::text[])) a)
            + (SELECT COALESCE(sum(pg_catalog.octet_length(e.key) + pg_catalog.octet_length(e.value)), 0)
                 FROM pg_catalog.jsonb_each_text(COALESCE(p_headers, '{}'::jsonb)) e);
  IF v_size > 2097152 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the message is % bytes (addresses, subject, bodies and custom headers), over the 2 MiB (2097152 bytes) limit',
      v_size USING ERRCODE = 'PR108';
  END IF;

  INSERT INTO pgrelay_notifier.notifications
    (channel, from_addr, to_addrs, cc_addrs, bcc_addrs, subject, body_text, body_html, headers)
  VALUES (p_channel, v_from, p_to, COALESCE(p_cc, '{}'), COALESCE(p_bcc, '{}'), p_subject, p_body_text,
          p_body_html, COALESCE(p_headers, '{}'))
  RETURNING notification_id INTO v_id;
  PERFORM pgrelay_notifier._event(v_id, p_channel, 'queued', NULL);
  PERFORM pgrelay.notify(p_channel, v_id::text);
  RETURN v_id;
END
$$;

-- ---------------------------------------------------------------------------
-- The gate
-- ---------------------------------------------------------------------------

-- start_sending: whether queue event p_event (its origin_id) of channel
-- p_channel may send notification p_notification_id now, and the message
-- when it may. verdict:
--   send       the event holds the notification: it moved it from queued to
--              sending now, or it already held it (its earlier attempt
--              failed transiently, or a Processor died during it): a new
--              attempt. The message columns are fetch()'s.
--   sent       this event already sent it (a redelivery): nothing to do.
--   cancelled  cancel() stopped it: nothing to send.
--   missing    no such notification on this node (not replicated here yet,
--              or deleted): retry, then give up.
--   refused    never to be sent by this event: created for another channel,
--              or held or ended by another event (or failed).
-- reason says why for every verdict but send. The row lock taken first
-- makes a concurrent cancel(), DELETE or other event's gate wait or win
-- whole. A notification 'sending' without sending_event (started before this
-- migration) goes to the first event that asks.
CREATE FUNCTION pgrelay_notifier.start_sending(p_notification_id bigint, p_channel text, p_event bigint)
RETURNS TABLE (verdict text, reason text, notification_id bigint, channel text, from_addr text,
               to_addrs text[], cc_addrs text[], bcc_addrs text[], subject text, body_text text,
               body_html text, headers jsonb, status text, attempts int, created_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_channel text;
  v_status text;
  v_holder bigint;
  v_error text;
  v_by text;
  v_verdict text;
  v_reason text;
BEGIN
  SELECT n.channel, n.status, n.sending_event, n.last_error INTO v_channel, v_status, v_holder, v_error
    FROM pgrelay_notifier.notifications n
   WHERE n.notification_id = p_notification_id
     FOR UPDATE;
  v_by := CASE WHEN v_holder IS NULL THEN '' ELSE pg_catalog.format(' by event %s', v_holder) END;
  IF v_channel IS NULL THEN  -- no row (channel is NOT NULL)
    v_verdict := 'missing';
    v_reason := pg_catalog.format('notification %s does not exist on node %s (not replicated to this node yet, or deleted)',
                                  p_notification_id, pgrelay._this_node());
  ELSIF v_channel IS DISTINCT FROM p_channel THEN
    v_verdict := 'refused';
    v_reason := pg_catalog.format('notification %s was created for channel %s, not %s: an event only sends its own channel''s notifications',
                                  p_notification_id, pg_catalog.quote_literal(v_channel),
                                  COALESCE(pg_catalog.quote_literal(p_channel), 'NULL'));
  ELSIF v_status = 'queued' OR (v_status = 'sending' AND (v_holder = p_event OR v_holder IS NULL)) THEN
    UPDATE pgrelay_notifier.notifications n SET sending_event = p_event
     WHERE n.notification_id = p_notification_id AND n.sending_event IS DISTINCT FROM p_event;
    PERFORM pgrelay_notifier.set_status(p_notification_id, 'sending');
    RETURN QUERY SELECT 'send'::text, NULL::text, f.* FROM pgrelay_notifier.fetch(p_notification_id) f;
    RETURN;
  ELSIF v_status = 'cancelled' THEN
    v_verdict := 'cancelled';
    v_reason := pg_catalog.format('notification %s was cancelled', p_notification_id);
  ELSIF v_status = 'sent' AND v_holder = p_event THEN
    v_verdict := 'sent';
    v_reason := pg_catalog.format('notification %s was already sent by this event', p_notification_id);
  ELSIF v_status = 'sending' THEN
    v_verdict := 'refused';
    v_reason := pg_catalog.format('notification %s is already being sent%s; one send() is delivered at most once',
                                  p_notification_id, v_by);
  ELSIF v_status = 'sent' THEN
    v_verdict := 'refused';
    v_reason := pg_catalog.format('notification %s was already sent%s; one send() is delivered at most once',
                                  p_notification_id, v_by);
  ELSE
    v_verdict := 'refused';
    v_reason := pg_catalog.format('notification %s already failed%s: %s', p_notification_id, v_by,
                                  COALESCE(v_error, 'no reason recorded'));
  END IF;
  RETURN QUERY SELECT v_verdict, v_reason, NULL::bigint, NULL::text, NULL::text, NULL::text[], NULL::text[],
                      NULL::text[], NULL::text, NULL::text, NULL::text, NULL::jsonb, NULL::text, NULL::int,
                      NULL::timestamptz;
END
$$;

-- fail_for_event: set_status(p_notification_id, 'failed', p_error) for queue
-- event p_event of channel p_channel, only where that event could still
-- send the notification: it is queued and of p_channel, or sending held by
-- p_event (or by no event). An event that lost the gate, or of another
-- channel, never fails a notification another event is sending or sent.
-- Returns whether the status changed.
CREATE FUNCTION pgrelay_notifier.fail_for_event(p_notification_id bigint, p_channel text, p_event bigint,
                                                p_error text)
RETURNS bool
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM FROM pgrelay_notifier.notifications n
    WHERE n.notification_id = p_notification_id AND n.channel = p_channel
      AND (n.status = 'queued'
           OR (n.status = 'sending' AND (n.sending_event = p_event OR n.sending_event IS NULL)))
      FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  RETURN pgrelay_notifier.set_status(p_notification_id, 'failed', p_error);
END
$$;

-- As in 0004: CREATE on the schema is lent for the ownership transfer only
-- (a non-superuser owner needs it to give the role a function).
GRANT CREATE ON SCHEMA pgrelay_notifier TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.start_sending(bigint, text, bigint) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.fail_for_event(bigint, text, bigint, text) OWNER TO pgrelay_notifier;
REVOKE CREATE ON SCHEMA pgrelay_notifier FROM pgrelay_notifier;
REVOKE ALL ON FUNCTION pgrelay_notifier.start_sending(bigint, text, bigint),
                       pgrelay_notifier.fail_for_event(bigint, text, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay_notifier.start_sending(bigint, text, bigint),
                          pgrelay_notifier.fail_for_event(bigint, text, bigint, text)
  TO pgrelay_processor;
