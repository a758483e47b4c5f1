-- pgrelay notifier: email channels. An application composes an email in SQL
-- inside its own transaction (pgrelay_notifier.send()); the Processor's email
-- handler sends it through SMTP and records its status here.
--
-- The ownership split (seed "notifier-multi-master-*"): the notifier keeps its
-- own tables and talks to pgrelay core only through pgrelay.notify() and
-- pgrelay.register(); it never reads or writes pgrelay.queue or pgrelay.log.
-- Its SECURITY DEFINER functions run as the NOLOGIN role pgrelay_notifier,
-- which holds no privilege on those two tables, so a function that tried
-- would fail with "permission denied".
--
-- The Processor's email handler makes only the interface calls fetch(),
-- set_status() and debug_log(); users call send(), get_status() and cancel().
--
-- Errors raised on purpose use SQLSTATE PR100-PR119 (see docs/notifier.md).

CREATE SCHEMA pgrelay_notifier;

DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pgrelay_notifier') THEN
    BEGIN
      CREATE ROLE pgrelay_notifier NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;  -- created meanwhile by the migration of another database
    END;
  END IF;
  -- The notifier's functions are owned by pgrelay_notifier (below), and only
  -- a member of a role may give it an object. A superuser is one already; a
  -- non-superuser owner with CREATEROLE (docs/dba-guide.md) makes itself one
  -- (PostgreSQL 15 does not make a role's creator its member). Without
  -- CREATEROLE, the DBA grants it beforehand: GRANT pgrelay_notifier TO owner.
  IF NOT pg_catalog.pg_has_role(CURRENT_USER, 'pgrelay_notifier', 'MEMBER') THEN
    EXECUTE pg_catalog.format('GRANT pgrelay_notifier TO %I', CURRENT_USER);
  END IF;
END
$$;

-- ---------------------------------------------------------------------------
-- Tables
-- ---------------------------------------------------------------------------

-- One row per email. notification_id comes from pgrelay's snowflake generator,
-- so ids stay unique across the nodes of a multi-master cluster should this
-- table ever be replicated. The status only moves forward:
--   queued -> sending -> sent | failed      queued -> cancelled
CREATE TABLE pgrelay_notifier.notifications (
  notification_id bigint PRIMARY KEY DEFAULT pgrelay._next_id(),
  channel         text NOT NULL,
  from_addr       text NOT NULL,
  to_addrs        text[] NOT NULL,
  cc_addrs        text[] NOT NULL DEFAULT '{}',
  bcc_addrs       text[] NOT NULL DEFAULT '{}',
  subject         text NOT NULL,
  body_text       text NOT NULL,
  body_html       text NULL,
  headers         jsonb NOT NULL DEFAULT '{}',
  status          text NOT NULL DEFAULT 'queued',
  attempts        int NOT NULL DEFAULT 0,
  last_error      text NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  sent_at         timestamptz NULL,
  CONSTRAINT notifications_status CHECK (status IN ('queued', 'sending', 'sent', 'failed', 'cancelled'))
);

-- Every status change, in order: what the NATS publisher follows (by node,
-- then id) to publish pgrelay.notifier.<channel>.<status>. Append-only; its
-- retention is the DBA's (docs/notifier.md).
CREATE TABLE pgrelay_notifier.status_events (
  id              bigint PRIMARY KEY DEFAULT pgrelay._next_id(),
  notification_id bigint NOT NULL,
  channel         text NOT NULL,
  status          text NOT NULL,
  error           text NULL,
  node            int NOT NULL DEFAULT pgrelay._this_node(),
  at              timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX status_events_node_id ON pgrelay_notifier.status_events (node, id);

-- The handler's notes on a notification (transient SMTP failures, skips),
-- bounded per notification by debug_log().
CREATE TABLE pgrelay_notifier.debug_log (
  id              bigint PRIMARY KEY DEFAULT pgrelay._next_id(),
  notification_id bigint NOT NULL,
  message         text NOT NULL,
  at              timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX debug_log_notification ON pgrelay_notifier.debug_log (notification_id, id);

-- ---------------------------------------------------------------------------
-- Validation helpers
-- ---------------------------------------------------------------------------

-- _check_address: raises PR102 naming the address unless p_addr is an RFC 5322
-- mailbox: an addr-spec (local-part "@" domain, each a dot-atom, or a quoted
-- string / domain literal) or a name-addr ("Display Name <addr-spec>"). Group
-- syntax and obsolete forms (comments, CFWS) are refused, and so is non-ASCII
-- outside the display name (RFC 6532 is only accepted there). RFC 5321's
-- limits apply as well: at most 64 octets of local part, 254 of addr-spec.
CREATE FUNCTION pgrelay_notifier._check_address(p_field text, p_addr text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  -- RFC 5322 3.2.3 atext, 3.2.4 quoted-string (qtext / quoted-pair, spaces
  -- allowed), 3.4.1 dtext.
  atext  constant text := '[A-Za-z0-9!#$%&''*+/=?^_`{|}~-]';
  quoted constant text := '"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"';
  v_local  text := '(?:' || atext || '+(?:\.' || atext || '+)*|' || quoted || ')';
  v_domain text := '(?:' || atext || '+(?:\.' || atext || '+)*|\[[\x21-\x5a\x5e-\x7e]*\])';
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
      HINT = 'Write local@domain or "Display Name <local@domain>".';
  END IF;
  IF pg_catalog.octet_length(v_addr) > 254
     OR pg_catalog.octet_length(pg_catalog.substr(v_addr, 1,
          pg_catalog.length(v_addr) - pg_catalog.strpos(pg_catalog.reverse(v_addr), '@'))) > 64 THEN
    RAISE EXCEPTION 'pgrelay_notifier: % address % is too long (RFC 5321: at most 64 octets before the "@", 254 in all)',
      p_field, pg_catalog.quote_literal(p_addr) USING ERRCODE = 'PR102';
  END IF;
END
$$;

-- _check_addresses: every element of a recipient list.
CREATE FUNCTION pgrelay_notifier._check_addresses(p_field text, p_addrs text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  a text;
BEGIN
  FOREACH a IN ARRAY COALESCE(p_addrs, '{}') LOOP
    PERFORM pgrelay_notifier._check_address(p_field, a);
  END LOOP;
END
$$;

-- _check_headers: p_headers is NULL or a JSON object of custom headers whose
-- values are strings: RFC 5322 field names (printable ASCII but ':'), values
-- without CR or LF (no header injection), and none of the headers the
-- handler writes itself.
CREATE FUNCTION pgrelay_notifier._check_headers(p_headers jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  k text;
  v jsonb;
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
  END LOOP;
END
$$;

-- _event: appends a status change to status_events.
CREATE FUNCTION pgrelay_notifier._event(p_notification_id bigint, p_channel text, p_status text,
                                        p_error text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
  INSERT INTO pgrelay_notifier.status_events (notification_id, channel, status, error)
  VALUES (p_notification_id, p_channel, p_status, p_error)
$$;

-- ---------------------------------------------------------------------------
-- Admin and producer API
-- ---------------------------------------------------------------------------

-- create_channel: registers an email channel whose From address is p_from.
-- Every other parameter is pgrelay.register()'s and passes through by name,
-- so a parameter register() gains later needs no change here. Notify
-- channels stay unrestricted by default (email has no node-local state).
-- SECURITY INVOKER: the caller needs the right to call pgrelay.register().
CREATE FUNCTION pgrelay_notifier.create_channel(
  p_channel text,
  p_from text,
  p_concurrency_mode text DEFAULT 'none',
  p_deduplicate bool DEFAULT false,
  p_node_restricted bool DEFAULT false,
  p_max_attempts int DEFAULT 5,
  p_retry_delay interval DEFAULT '1 second',
  p_expire_after interval DEFAULT NULL,
  p_timeout interval DEFAULT '30 seconds',
  p_publish_payload bool DEFAULT false
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
    p_publish_payload := p_publish_payload);
END
$$;

-- send: validates and stores one email and enqueues it with pgrelay.notify(),
-- in the caller's transaction: the email exists only if that commits.
-- Limits: at least one To address; at most 100 recipients in all (the number
-- RFC 5321 requires a server to accept); a subject without CR or LF; each body
-- at most 1 MiB (1 048 576 bytes).
CREATE FUNCTION pgrelay_notifier.send(
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

-- get_status: queued, sending, sent, failed or cancelled; NULL for an unknown id.
CREATE FUNCTION pgrelay_notifier.get_status(p_notification_id bigint) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT n.status FROM pgrelay_notifier.notifications n WHERE n.notification_id = p_notification_id
$$;

-- cancel: a queued notification is not sent; returns false when it was not
-- queued any more (sending started, or it ended) or does not exist.
CREATE FUNCTION pgrelay_notifier.cancel(p_notification_id bigint) RETURNS bool
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_channel text;
BEGIN
  UPDATE pgrelay_notifier.notifications n
     SET status = 'cancelled', updated_at = clock_timestamp()
   WHERE n.notification_id = p_notification_id AND n.status = 'queued'
  RETURNING n.channel INTO v_channel;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pgrelay_notifier._event(p_notification_id, v_channel, 'cancelled', NULL);
  RETURN true;
END
$$;

-- ---------------------------------------------------------------------------
-- The interface contract: the only calls the Processor's email handler makes
-- ---------------------------------------------------------------------------

-- fetch: the message to send; no row when there is nothing to send (the
-- notification was deleted, cancelled, or already sent or failed: a
-- redelivered queue event then sends nothing twice).
CREATE FUNCTION pgrelay_notifier.fetch(p_notification_id bigint)
RETURNS TABLE (notification_id bigint, channel text, from_addr text, to_addrs text[],
               cc_addrs text[], bcc_addrs text[], subject text, body_text text, body_html text,
               headers jsonb, status text, attempts int, created_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT n.notification_id, n.channel, n.from_addr, n.to_addrs, n.cc_addrs, n.bcc_addrs, n.subject,
         n.body_text, n.body_html, n.headers, n.status, n.attempts, n.created_at
    FROM pgrelay_notifier.notifications n
   WHERE n.notification_id = p_notification_id AND n.status IN ('queued', 'sending')
$$;

-- set_status: moves a notification forward, never back (the conditional
-- update of seed store-patterns item 4: a late 'sending' after 'sent' changes
-- nothing). Allowed moves: queued -> sending; queued | sending -> sent |
-- failed. 'sending' again on a notification already sending is a new attempt:
-- attempts grows, the status does not change. Every change it makes appends
-- one row to status_events; it returns whether the status changed.
CREATE FUNCTION pgrelay_notifier.set_status(p_notification_id bigint, p_status text,
                                            p_error text DEFAULT NULL)
RETURNS bool
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_channel text;
  v_error text := pg_catalog.left(p_error, 8000);
BEGIN
  IF p_status IS NULL OR p_status NOT IN ('queued', 'sending', 'sent', 'failed') THEN
    RAISE EXCEPTION 'pgrelay_notifier.set_status: unknown status % (expected sending, sent or failed)',
      COALESCE(pg_catalog.quote_literal(p_status), 'NULL') USING ERRCODE = 'PR110';
  END IF;
  UPDATE pgrelay_notifier.notifications n
     SET status = p_status,
         attempts = n.attempts + CASE WHEN p_status = 'sending' THEN 1 ELSE 0 END,
         last_error = CASE WHEN p_status = 'failed' THEN v_error ELSE n.last_error END,
         sent_at = CASE WHEN p_status = 'sent' THEN clock_timestamp() ELSE n.sent_at END,
         updated_at = clock_timestamp()
   WHERE n.notification_id = p_notification_id
     AND n.status = ANY (CASE p_status WHEN 'sending' THEN ARRAY['queued']
                                       WHEN 'sent' THEN ARRAY['queued', 'sending']
                                       WHEN 'failed' THEN ARRAY['queued', 'sending']
                                       ELSE ARRAY[]::text[] END)
  RETURNING n.channel INTO v_channel;
  IF FOUND THEN
    PERFORM pgrelay_notifier._event(p_notification_id, v_channel, p_status,
                                    CASE WHEN p_status = 'failed' THEN v_error END);
    RETURN true;
  END IF;
  IF p_status = 'sending' THEN
    UPDATE pgrelay_notifier.notifications n
       SET attempts = n.attempts + 1, updated_at = clock_timestamp()
     WHERE n.notification_id = p_notification_id AND n.status = 'sending';
  END IF;
  RETURN false;
END
$$;

-- debug_log: appends a note and keeps only the 20 most recent of the
-- notification, in one statement (seed store-patterns item 2): insert, collect
-- the newest, delete the rest. A note on an unknown notification is dropped.
CREATE FUNCTION pgrelay_notifier.debug_log(p_notification_id bigint, p_message text) RETURNS void
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  WITH ins AS (
    INSERT INTO pgrelay_notifier.debug_log (notification_id, message)
    SELECT p_notification_id, pg_catalog.left(COALESCE(p_message, ''), 4000)
     WHERE EXISTS (SELECT FROM pgrelay_notifier.notifications n
                    WHERE n.notification_id = p_notification_id)
    RETURNING id
  ), keep AS (
    -- The statement's snapshot does not see the row ins adds: keep 19 older.
    SELECT d.id FROM pgrelay_notifier.debug_log d
     WHERE d.notification_id = p_notification_id
     ORDER BY d.id DESC
     LIMIT 19
  )
  DELETE FROM pgrelay_notifier.debug_log d
   WHERE d.notification_id = p_notification_id
     AND EXISTS (SELECT FROM ins)
     AND d.id NOT IN (SELECT keep.id FROM keep)
$$;

-- ---------------------------------------------------------------------------
-- Ownership and privileges
-- ---------------------------------------------------------------------------

-- The notifier's functions run as pgrelay_notifier, which may do exactly what
-- they need: its own tables, read a channel's kind and From address, make ids,
-- and enqueue through pgrelay.notify(). Nothing on pgrelay.queue or pgrelay.log.
-- A new owner must hold CREATE on the function's schema unless a superuser
-- runs this: granted for the transfer only, and taken back below.
GRANT CREATE ON SCHEMA pgrelay_notifier TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier._check_address(text, text) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier._check_addresses(text, text[]) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier._check_headers(jsonb) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier._event(bigint, text, text, text) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.create_channel(text, text, text, bool, bool, int, interval, interval, interval, bool)
  OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.send(text, text[], text, text, text, text[], text[], jsonb) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.get_status(bigint) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.cancel(bigint) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.fetch(bigint) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.set_status(bigint, text, text) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.debug_log(bigint, text) OWNER TO pgrelay_notifier;
REVOKE CREATE ON SCHEMA pgrelay_notifier FROM pgrelay_notifier;

REVOKE ALL ON SCHEMA pgrelay_notifier FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA pgrelay_notifier FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgrelay_notifier FROM PUBLIC;
ALTER DEFAULT PRIVILEGES IN SCHEMA pgrelay_notifier REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

GRANT USAGE ON SCHEMA pgrelay_notifier
  TO pgrelay_notifier, pgrelay_producer, pgrelay_processor, pgrelay_admin;

-- pgrelay_notifier: its tables, and of pgrelay core only what send() and the
-- id defaults need.
GRANT SELECT, INSERT, UPDATE ON pgrelay_notifier.notifications TO pgrelay_notifier;
GRANT INSERT ON pgrelay_notifier.status_events TO pgrelay_notifier;
GRANT SELECT, INSERT, DELETE ON pgrelay_notifier.debug_log TO pgrelay_notifier;
GRANT USAGE ON SCHEMA pgrelay TO pgrelay_notifier;
GRANT SELECT (channel, kind, handler) ON pgrelay.channels TO pgrelay_notifier;
GRANT EXECUTE ON FUNCTION pgrelay.notify(text, text), pgrelay._next_id(), pgrelay._next_id_at(bigint),
                          pgrelay._this_node()
  TO pgrelay_notifier;
GRANT USAGE, UPDATE ON SEQUENCE pgrelay._id_seq TO pgrelay_notifier;

-- Producers compose, ask, cancel.
GRANT EXECUTE ON FUNCTION
  pgrelay_notifier.send(text, text[], text, text, text, text[], text[], jsonb),
  pgrelay_notifier.get_status(bigint),
  pgrelay_notifier.cancel(bigint)
  TO pgrelay_producer;

-- The Processor's email handler: the interface contract; the NATS publisher
-- follows status_events.
GRANT EXECUTE ON FUNCTION
  pgrelay_notifier.fetch(bigint),
  pgrelay_notifier.set_status(bigint, text, text),
  pgrelay_notifier.debug_log(bigint, text)
  TO pgrelay_processor;
GRANT SELECT ON pgrelay_notifier.status_events TO pgrelay_processor;

-- Admins create channels (create_channel runs with their right to register)
-- and watch.
GRANT EXECUTE ON FUNCTION
  pgrelay_notifier.create_channel(text, text, text, bool, bool, int, interval, interval, interval, bool),
  pgrelay_notifier._check_address(text, text),
  pgrelay_notifier.send(text, text[], text, text, text, text[], text[], jsonb),
  pgrelay_notifier.get_status(bigint),
  pgrelay_notifier.cancel(bigint)
  TO pgrelay_admin;
GRANT SELECT ON pgrelay_notifier.notifications, pgrelay_notifier.status_events, pgrelay_notifier.debug_log
  TO pgrelay_admin;
