-- pgrelay's notifier as of release v0.1.0: email channels. An application
-- composes an email in SQL inside its own transaction
-- (pgrelay_notifier.send()); the Processor's email handler sends it through
-- SMTP and records its status here.
--
-- The ownership split (seed "notifier-multi-master-*"): the notifier keeps its
-- own tables and talks to pgrelay core only through pgrelay.notify() and
-- pgrelay.register(); it never reads or writes pgrelay.queue or pgrelay.log.
-- Its SECURITY DEFINER functions run as the NOLOGIN role pgrelay_notifier,
-- which holds no privilege on those two tables, so a function that tried
-- would fail with "permission denied".
--
-- Users call send(), get_status() and cancel(); admins create_channel(). The
-- Processor's email handler makes only the interface calls
-- start_sending_many() / start_sending() (the send gate, then the messages),
-- not_sent(), fail_for_event(), set_status_many() / set_status() and
-- debug_log() (fetch() reads a message without the gate).
--
-- Errors raised on purpose use SQLSTATE PR100-PR119 (see docs/notifier.md).

-- ---------------------------------------------------------------------------
-- Role and schema
-- ---------------------------------------------------------------------------

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

-- As in schema pgrelay: no function of the notifier's is executable by PUBLIC.
ALTER DEFAULT PRIVILEGES IN SCHEMA pgrelay_notifier REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Tables
-- ---------------------------------------------------------------------------

-- One row per email. notification_id comes from pgrelay's snowflake generator,
-- so ids stay unique across the nodes of a multi-master cluster should this
-- table ever be replicated. The status only moves forward:
--   queued -> sending -> sent | failed      queued -> cancelled
--
-- One send() is delivered at most once, whatever events point at it. The
-- move queued -> sending is the gate: start_sending() records which queue
-- event (its origin_id) won it in sending_event, and only that event's
-- attempts send. When an attempt's outcome is unknown (the Processor died,
-- or the database went away, between handing the message to the SMTP server
-- and recording 'sent'; or the server's reply to the end of DATA never came)
-- sending again could deliver it twice: send_in_doubt marks the
-- notification from the moment an attempt may hand the message over until
-- its outcome is recorded, and a later attempt that finds it set does not
-- send.
--
-- A notification belongs to the role that sent it (sent_by). Notification
-- ids are not capabilities: they are time-ordered, so guessable, and
-- published on NATS. get_status() and cancel() answer only for a
-- notification the caller may see (_may_see), and for any other exactly as
-- for an id that does not exist, so ids cannot be probed. Stored as the
-- role's name, not its oid: roles have their own oids on each node of a
-- multi-master cluster, and this table replicates.
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
  sending_event   bigint NULL,
  send_in_doubt   bool NOT NULL DEFAULT false,
  sent_by         text NULL,
  CONSTRAINT notifications_status CHECK (status IN ('queued', 'sending', 'sent', 'failed', 'cancelled'))
);
COMMENT ON COLUMN pgrelay_notifier.notifications.sending_event IS
  'origin_id of the queue event that moved the notification from queued to sending: only its attempts send it';
COMMENT ON COLUMN pgrelay_notifier.notifications.send_in_doubt IS
  'true from the moment an attempt may hand the message to the SMTP server until its outcome is recorded';
COMMENT ON COLUMN pgrelay_notifier.notifications.sent_by IS
  'the role that called send(): SET ROLE''s role, else the login; only it, its members and admins see and cancel the notification (NULL: admins only)';

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
-- Validation and the caller's identity
-- ---------------------------------------------------------------------------

-- _check_address: raises PR102 naming the address unless p_addr is an RFC 5322
-- mailbox: an addr-spec (local-part "@" domain, each a dot-atom, or a quoted
-- string / domain literal) or a name-addr ("Display Name <addr-spec>"). Group
-- syntax and obsolete forms (comments, CFWS) are refused, and so is non-ASCII
-- outside the display name (RFC 6532 is only accepted there). RFC 5321's
-- limits apply as well: at most 64 octets of local part, 254 of addr-spec;
-- a display name has at most 256 bytes.
--
-- A domain literal is accepted as Go's net/mail.ParseAddress reads it (the
-- email handler builds messages with go-mail, which parses every address
-- with it): only an IP address net.ParseIP reads, a dotted IPv4 address (no
-- leading zeros) or a plain IPv6 address (no "IPv6:" tag, no zone). Any other
-- dtext ("[IPv6:::1]", "[host]") would be stored and then fail for good when
-- sent.
CREATE FUNCTION pgrelay_notifier._check_address(p_field text, p_addr text) RETURNS void
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
-- without CR or LF (no header injection), none of the headers the handler
-- writes itself, and at most 50 custom headers of at most
-- 16 KiB (16 384 bytes) of names and values together.
CREATE FUNCTION pgrelay_notifier._check_headers(p_headers jsonb) RETURNS void
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

-- _caller: the role of the calling session, as send() records it and
-- get_status() and cancel() check it: the role set with SET ROLE (or SET
-- LOCAL ROLE) when there is one, else the login. The same inside any
-- SECURITY DEFINER function, ours or the application's.
CREATE FUNCTION pgrelay_notifier._caller() RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN pg_catalog.current_setting('role') = 'none' THEN SESSION_USER::text
              ELSE pg_catalog.current_setting('role') END
$$;

-- _may_see: whether the calling session may read and cancel a notification
-- sent by p_sent_by: an admin (member of pgrelay_admin, or a superuser) any;
-- any other caller those its own role sent, or a role it is a member of.
-- A sender role that no longer exists (dropped, renamed) matches no one.
CREATE FUNCTION pgrelay_notifier._may_see(p_sent_by text) RETURNS bool
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT pg_catalog.pg_has_role(pgrelay_notifier._caller()::name, 'pgrelay_admin', 'MEMBER')
      OR EXISTS (SELECT FROM pg_catalog.pg_roles r
                  WHERE r.rolname = p_sent_by
                    AND pg_catalog.pg_has_role(pgrelay_notifier._caller()::name, r.oid, 'MEMBER'))
$$;

-- _event: appends one status change per notification to status_events, in
-- the order given (notification p_notification_ids[i] of channel
-- p_channels[i]).
CREATE FUNCTION pgrelay_notifier._event(p_notification_ids bigint[], p_channels text[], p_status text,
                                        p_error text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
  INSERT INTO pgrelay_notifier.status_events (notification_id, channel, status, error)
  SELECT e.id, e.channel, p_status, p_error
    FROM unnest(p_notification_ids, p_channels) WITH ORDINALITY AS e(id, channel, ord)
   ORDER BY e.ord
$$;

-- ---------------------------------------------------------------------------
-- Admin and producer API
-- ---------------------------------------------------------------------------

-- create_channel: registers an email channel whose From address is p_from.
-- Every other parameter is pgrelay.register()'s and passes through by name.
-- Email channels stay unrestricted by default (email has no node-local
-- state), and ride out an hour of SMTP trouble: 10 attempts from 10 seconds,
-- whose waits (pgrelay._backoff) between the first and the last attempt add
-- up to 10 s x (2^9 - 1) = 5110 s nominal, 4088 s at the lowest jitter
-- (docs/notifier.md). SECURITY INVOKER: the caller needs the right to call
-- pgrelay.register().
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

-- send: validates and stores one email and enqueues it with pgrelay.notify(),
-- in the caller's transaction: the email exists only if that commits. The
-- sending role (_caller) is recorded in sent_by.
-- Limits: at least one To address; at most 100 recipients in all (the number
-- RFC 5321 requires a server to accept); a subject without CR or LF, at most
-- 998 bytes (PR103); each body at most 1 MiB (1 048 576 bytes); the whole
-- message at most 2 MiB (PR108): the From, every address, the subject, both
-- bodies and the custom headers' names and values together, counted in bytes
-- as stored (octet_length). What goes on the wire is larger: the bodies are
-- encoded (quoted-printable or base64).
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
    (channel, from_addr, to_addrs, cc_addrs, bcc_addrs, subject, body_text, body_html, headers, sent_by)
  VALUES (p_channel, v_from, p_to, COALESCE(p_cc, '{}'), COALESCE(p_bcc, '{}'), p_subject, p_body_text,
          p_body_html, COALESCE(p_headers, '{}'), pgrelay_notifier._caller())
  RETURNING notification_id INTO v_id;
  PERFORM pgrelay_notifier._event(ARRAY[v_id], ARRAY[p_channel], 'queued', NULL);
  PERFORM pgrelay.notify(p_channel, v_id::text);
  RETURN v_id;
END
$$;

-- get_status: queued, sending, sent, failed or cancelled, for a notification
-- the caller may see (_may_see); NULL for any other id, as for an unknown one.
CREATE FUNCTION pgrelay_notifier.get_status(p_notification_id bigint) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT n.status FROM pgrelay_notifier.notifications n
   WHERE n.notification_id = p_notification_id AND pgrelay_notifier._may_see(n.sent_by)
$$;

-- cancel: a queued notification the caller may see (_may_see) is not sent;
-- returns false when it was not queued any more (sending started, or it
-- ended), does not exist, or is not the caller's to see.
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
     AND pgrelay_notifier._may_see(n.sent_by)
  RETURNING n.channel INTO v_channel;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pgrelay_notifier._event(ARRAY[p_notification_id], ARRAY[v_channel], 'cancelled', NULL);
  RETURN true;
END
$$;

-- ---------------------------------------------------------------------------
-- The interface contract: the only calls the Processor's email handler makes
-- ---------------------------------------------------------------------------

-- set_status_many: moves notifications forward, never back (the conditional
-- update of seed store-patterns item 4: a late 'sending' after 'sent' changes
-- nothing), each notification of p_notification_ids once, in one statement.
-- Allowed moves: queued -> sending; queued | sending -> sent | failed.
-- 'sending' again on a notification already sending is a new attempt:
-- attempts grows, the status does not change. Every change it makes appends
-- one row to status_events; it returns the ids whose status changed, in
-- order. Rows are updated in notification order, so two calls never
-- deadlock on each other.
CREATE FUNCTION pgrelay_notifier.set_status_many(p_notification_ids bigint[], p_status text,
                                                 p_error text DEFAULT NULL)
RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_error text := pg_catalog.left(p_error, 8000);
  v_ids bigint[];
  v_channels text[];
BEGIN
  IF p_status IS NULL OR p_status NOT IN ('queued', 'sending', 'sent', 'failed') THEN
    RAISE EXCEPTION 'pgrelay_notifier.set_status: unknown status % (expected sending, sent or failed)',
      COALESCE(pg_catalog.quote_literal(p_status), 'NULL') USING ERRCODE = 'PR110';
  END IF;
  WITH u AS (
    UPDATE pgrelay_notifier.notifications n
       SET status = p_status,
           attempts = n.attempts + CASE WHEN p_status = 'sending' THEN 1 ELSE 0 END,
           last_error = CASE WHEN p_status = 'failed' THEN v_error ELSE n.last_error END,
           sent_at = CASE WHEN p_status = 'sent' THEN pg_catalog.clock_timestamp() ELSE n.sent_at END,
           updated_at = pg_catalog.clock_timestamp()
     WHERE n.notification_id = ANY (p_notification_ids)
       AND n.status = ANY (CASE p_status WHEN 'sending' THEN ARRAY['queued']
                                         WHEN 'sent' THEN ARRAY['queued', 'sending']
                                         WHEN 'failed' THEN ARRAY['queued', 'sending']
                                         ELSE ARRAY[]::text[] END)
    RETURNING n.notification_id, n.channel
  )
  SELECT COALESCE(pg_catalog.array_agg(u.notification_id ORDER BY u.notification_id), '{}'),
         COALESCE(pg_catalog.array_agg(u.channel ORDER BY u.notification_id), '{}')
    INTO v_ids, v_channels
    FROM u;
  IF pg_catalog.cardinality(v_ids) > 0 THEN
    PERFORM pgrelay_notifier._event(v_ids, v_channels, p_status, CASE WHEN p_status = 'failed' THEN v_error END);
  END IF;
  IF p_status = 'sending' THEN
    UPDATE pgrelay_notifier.notifications n
       SET attempts = n.attempts + 1, updated_at = pg_catalog.clock_timestamp()
     WHERE n.notification_id = ANY (p_notification_ids) AND n.status = 'sending'
       AND NOT n.notification_id = ANY (v_ids);
  END IF;
  RETURN v_ids;
END
$$;

-- set_status: set_status_many() for one notification; returns whether its
-- status changed.
CREATE FUNCTION pgrelay_notifier.set_status(p_notification_id bigint, p_status text,
                                            p_error text DEFAULT NULL)
RETURNS bool
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(p_notification_id = ANY (pgrelay_notifier.set_status_many(ARRAY[p_notification_id], p_status, p_error)),
                  false)
$$;

-- start_sending_many: the send gate, for several queue events in one call
-- and one transaction: whether queue event p_events[i] (its origin_id) of
-- channel p_channels[i] may send notification p_notification_ids[i] now, and
-- the message when it may. One row per element, ord = i (in rounds: order
-- by ord). verdict:
--   send       the event holds the notification: it moved it from queued to
--              sending now, or it already held it (its earlier attempt
--              certainly handed nothing over): a new attempt. The message
--              columns are fetch()'s. The notification is in doubt
--              (send_in_doubt) from here until the handler records the
--              outcome: sent, or not_sent().
--   in_doubt   this event's earlier attempt may have handed the message to
--              the SMTP server and its outcome is unknown: not sent again,
--              the handler fails the notification with the reason.
--   sent       this event already sent it (a redelivery): nothing to do.
--   cancelled  cancel() stopped it: nothing to send.
--   missing    no such notification on this node (not replicated here yet,
--              or deleted): retry with the channel's backoff, then give up
--              naming the notification.
--   refused    never to be sent by this event: created for another channel,
--              or held or ended by another event (or failed).
-- reason says why for every verdict but send. The row locks, taken first and
-- in notification order (two calls never deadlock on each other), make a
-- concurrent cancel(), DELETE or other event's gate wait or win whole. A
-- notification 'sending' without sending_event (moved there by set_status)
-- goes to the first event that asks. Elements are decided in order, as calls
-- of start_sending() one after the other would: a notification named twice
-- is decided for its second element once its first has taken it (the second
-- event is then refused).
CREATE FUNCTION pgrelay_notifier.start_sending_many(p_notification_ids bigint[], p_channels text[],
                                                    p_events bigint[])
RETURNS TABLE (ord int, verdict text, reason text, notification_id bigint, channel text, from_addr text,
               to_addrs text[], cc_addrs text[], bcc_addrs text[], subject text, body_text text,
               body_html text, headers jsonb, status text, attempts int, created_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_left int[];      -- elements not decided yet
  v_round int[];     -- this round: the first element left of each notification
  v_ords int[];
  v_verdicts text[];
  v_reasons text[];
BEGIN
  IF pg_catalog.cardinality(p_channels) IS DISTINCT FROM pg_catalog.cardinality(p_notification_ids)
     OR pg_catalog.cardinality(p_events) IS DISTINCT FROM pg_catalog.cardinality(p_notification_ids) THEN
    RAISE EXCEPTION 'pgrelay_notifier.start_sending_many: % notification ids, % channels and % events: one each per element',
      pg_catalog.cardinality(p_notification_ids), pg_catalog.cardinality(p_channels),
      pg_catalog.cardinality(p_events) USING ERRCODE = 'PR111';
  END IF;
  PERFORM FROM pgrelay_notifier.notifications n
    WHERE n.notification_id = ANY (p_notification_ids)
    ORDER BY n.notification_id
      FOR UPDATE;
  v_left := ARRAY(SELECT g FROM pg_catalog.generate_subscripts(p_notification_ids, 1) g ORDER BY g);
  WHILE pg_catalog.cardinality(v_left) > 0 LOOP
    SELECT COALESCE(pg_catalog.array_agg(s.o ORDER BY s.o) FILTER (WHERE s.rn = 1), '{}'),
           COALESCE(pg_catalog.array_agg(s.o ORDER BY s.o) FILTER (WHERE s.rn > 1), '{}')
      INTO v_round, v_left
      FROM (SELECT l.o, pg_catalog.row_number() OVER (PARTITION BY p_notification_ids[l.o] ORDER BY l.o) AS rn
              FROM unnest(v_left) AS l(o)) s;
    -- The rule, for each element of the round, from the row as it stands.
    SELECT pg_catalog.array_agg(x.o ORDER BY x.o), pg_catalog.array_agg(x.v ORDER BY x.o),
           pg_catalog.array_agg(x.r ORDER BY x.o)
      INTO v_ords, v_verdicts, v_reasons
      FROM (
        SELECT e.o,
               CASE WHEN n.notification_id IS NULL THEN 'missing'
                    WHEN n.channel IS DISTINCT FROM e.ch THEN 'refused'
                    WHEN n.status = 'sending' AND n.sending_event = e.ev AND n.send_in_doubt THEN 'in_doubt'
                    WHEN n.status = 'queued'
                         OR (n.status = 'sending' AND (n.sending_event = e.ev OR n.sending_event IS NULL)) THEN 'send'
                    WHEN n.status = 'cancelled' THEN 'cancelled'
                    WHEN n.status = 'sent' AND n.sending_event = e.ev THEN 'sent'
                    ELSE 'refused' END AS v,
               CASE WHEN n.notification_id IS NULL THEN
                      pg_catalog.format('notification %s does not exist on node %s (not replicated to this node yet, or deleted)',
                                        e.id, pgrelay._this_node())
                    WHEN n.channel IS DISTINCT FROM e.ch THEN
                      pg_catalog.format('notification %s was created for channel %s, not %s: an event only sends its own channel''s notifications',
                                        e.id, pg_catalog.quote_literal(n.channel), COALESCE(pg_catalog.quote_literal(e.ch), 'NULL'))
                    WHEN n.status = 'sending' AND n.sending_event = e.ev AND n.send_in_doubt THEN
                      pg_catalog.format('an earlier attempt of event %s may have handed notification %s to the SMTP server '
                                        '(it stopped, or lost the database, before the outcome was recorded): not sent again, '
                                        'so that it is never delivered twice; it may have been delivered', e.ev, e.id)
                    WHEN n.status = 'queued'
                         OR (n.status = 'sending' AND (n.sending_event = e.ev OR n.sending_event IS NULL)) THEN NULL
                    WHEN n.status = 'cancelled' THEN pg_catalog.format('notification %s was cancelled', e.id)
                    WHEN n.status = 'sent' AND n.sending_event = e.ev THEN
                      pg_catalog.format('notification %s was already sent by this event', e.id)
                    WHEN n.status = 'sending' THEN
                      pg_catalog.format('notification %s is already being sent%s; one send() is delivered at most once',
                                        e.id, CASE WHEN n.sending_event IS NULL THEN '' ELSE pg_catalog.format(' by event %s', n.sending_event) END)
                    WHEN n.status = 'sent' THEN
                      pg_catalog.format('notification %s was already sent%s; one send() is delivered at most once',
                                        e.id, CASE WHEN n.sending_event IS NULL THEN '' ELSE pg_catalog.format(' by event %s', n.sending_event) END)
                    ELSE pg_catalog.format('notification %s already failed%s: %s', e.id, CASE WHEN n.sending_event IS NULL THEN '' ELSE pg_catalog.format(' by event %s', n.sending_event) END,
                                           COALESCE(n.last_error, 'no reason recorded')) END AS r
          FROM (SELECT r.o, p_notification_ids[r.o] AS id, p_channels[r.o] AS ch, p_events[r.o] AS ev
                  FROM unnest(v_round) AS r(o)) e
          LEFT JOIN pgrelay_notifier.notifications n ON n.notification_id = e.id
      ) x;
    -- In doubt from here until the handler records the outcome: sent, or
    -- certainly not handed over (not_sent).
    UPDATE pgrelay_notifier.notifications n SET sending_event = p_events[s.o], send_in_doubt = true
      FROM unnest(v_ords, v_verdicts) AS s(o, v)
     WHERE s.v = 'send' AND n.notification_id = p_notification_ids[s.o];
    PERFORM pgrelay_notifier.set_status_many(
      ARRAY(SELECT p_notification_ids[s.o] FROM unnest(v_ords, v_verdicts) AS s(o, v) WHERE s.v = 'send'),
      'sending');
    RETURN QUERY
      SELECT s.o, s.v, s.r, f.*
        FROM unnest(v_ords, v_verdicts, v_reasons) AS s(o, v, r)
        LEFT JOIN LATERAL pgrelay_notifier.fetch(CASE WHEN s.v = 'send' THEN p_notification_ids[s.o] END) f ON true
       ORDER BY s.o;
  END LOOP;
END
$$;

-- start_sending: start_sending_many() for one event: the gate's verdict on
-- notification p_notification_id for queue event p_event of channel
-- p_channel, with the message when it is 'send'.
CREATE FUNCTION pgrelay_notifier.start_sending(p_notification_id bigint, p_channel text, p_event bigint)
RETURNS TABLE (verdict text, reason text, notification_id bigint, channel text, from_addr text,
               to_addrs text[], cc_addrs text[], bcc_addrs text[], subject text, body_text text,
               body_html text, headers jsonb, status text, attempts int, created_at timestamptz)
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT s.verdict, s.reason, s.notification_id, s.channel, s.from_addr, s.to_addrs, s.cc_addrs, s.bcc_addrs,
         s.subject, s.body_text, s.body_html, s.headers, s.status, s.attempts, s.created_at
    FROM pgrelay_notifier.start_sending_many(ARRAY[p_notification_id], ARRAY[p_channel], ARRAY[p_event]) s
$$;

-- not_sent: the attempt of event p_event certainly handed nothing to the SMTP
-- server; a later attempt may send. True when it cleared the mark.
CREATE FUNCTION pgrelay_notifier.not_sent(p_notification_id bigint, p_event bigint) RETURNS bool
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  WITH c AS (
    UPDATE pgrelay_notifier.notifications n SET send_in_doubt = false
     WHERE n.notification_id = p_notification_id AND n.status = 'sending'
       AND n.sending_event = p_event AND n.send_in_doubt
    RETURNING 1
  )
  SELECT EXISTS (SELECT FROM c);
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
ALTER FUNCTION pgrelay_notifier._caller() OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier._may_see(text) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier._event(bigint[], text[], text, text) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.create_channel(text, text, text, bool, bool, int, interval, interval, interval, bool, text)
  OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.send(text, text[], text, text, text, text[], text[], jsonb) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.get_status(bigint) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.cancel(bigint) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.start_sending_many(bigint[], text[], bigint[]) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.start_sending(bigint, text, bigint) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.not_sent(bigint, bigint) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.fail_for_event(bigint, text, bigint, text) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.fetch(bigint) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.set_status_many(bigint[], text, text) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.set_status(bigint, text, text) OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.debug_log(bigint, text) OWNER TO pgrelay_notifier;
REVOKE CREATE ON SCHEMA pgrelay_notifier FROM pgrelay_notifier;

REVOKE ALL ON SCHEMA pgrelay_notifier FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA pgrelay_notifier FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgrelay_notifier FROM PUBLIC;

GRANT USAGE ON SCHEMA pgrelay_notifier
  TO pgrelay_notifier, pgrelay_producer, pgrelay_processor, pgrelay_admin;

-- pgrelay_notifier: its tables, and of pgrelay core only what send() and the
-- id defaults need: a channel's kind and From address, ids (the node's row,
-- locked when the id counter moves), notify().
GRANT SELECT, INSERT, UPDATE ON pgrelay_notifier.notifications TO pgrelay_notifier;
GRANT INSERT ON pgrelay_notifier.status_events TO pgrelay_notifier;
GRANT SELECT, INSERT, DELETE ON pgrelay_notifier.debug_log TO pgrelay_notifier;
GRANT USAGE ON SCHEMA pgrelay TO pgrelay_notifier;
GRANT SELECT (channel, kind, handler) ON pgrelay.channels TO pgrelay_notifier;
GRANT SELECT (node_id), UPDATE (updated_at) ON pgrelay.this_node TO pgrelay_notifier;
GRANT USAGE, UPDATE ON SEQUENCE pgrelay._id_seq TO pgrelay_notifier;
GRANT EXECUTE ON FUNCTION
  pgrelay.notify(text, text, timestamptz, interval),
  pgrelay._next_id(), pgrelay._next_id_at(bigint), pgrelay._this_node(), pgrelay._node_setting()
  TO pgrelay_notifier;

-- Producers compose, ask, cancel.
GRANT EXECUTE ON FUNCTION
  pgrelay_notifier.send(text, text[], text, text, text, text[], text[], jsonb),
  pgrelay_notifier.get_status(bigint),
  pgrelay_notifier.cancel(bigint)
  TO pgrelay_producer;

-- The Processor's email handler: the interface contract; the NATS publisher
-- follows status_events.
GRANT EXECUTE ON FUNCTION
  pgrelay_notifier.start_sending_many(bigint[], text[], bigint[]),
  pgrelay_notifier.start_sending(bigint, text, bigint),
  pgrelay_notifier.not_sent(bigint, bigint),
  pgrelay_notifier.fail_for_event(bigint, text, bigint, text),
  pgrelay_notifier.fetch(bigint),
  pgrelay_notifier.set_status_many(bigint[], text, text),
  pgrelay_notifier.set_status(bigint, text, text),
  pgrelay_notifier.debug_log(bigint, text)
  TO pgrelay_processor;
GRANT SELECT ON pgrelay_notifier.status_events TO pgrelay_processor;

-- Admins create channels (create_channel runs with their right to register)
-- and watch.
GRANT EXECUTE ON FUNCTION
  pgrelay_notifier.create_channel(text, text, text, bool, bool, int, interval, interval, interval, bool, text),
  pgrelay_notifier._check_address(text, text),
  pgrelay_notifier.send(text, text[], text, text, text, text[], text[], jsonb),
  pgrelay_notifier.get_status(bigint),
  pgrelay_notifier.cancel(bigint)
  TO pgrelay_admin;
GRANT SELECT ON pgrelay_notifier.notifications, pgrelay_notifier.status_events, pgrelay_notifier.debug_log
  TO pgrelay_admin;
