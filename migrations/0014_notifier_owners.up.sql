-- 0014: a notification belongs to the role that sent it, and email channels
-- ride out an hour of SMTP trouble.
--
-- 1. Notification ids are not capabilities. They are time-ordered, so
--    guessable, and published on NATS; until now any producer could read
--    (get_status) or cancel any email by its id. send() records the sending
--    role in sent_by; get_status() and cancel() answer only for a
--    notification the caller may see, and answer for any other exactly as
--    for an id that does not exist (NULL, false), so ids cannot be probed.
--    The rule, in _may_see(): a member of pgrelay_admin (or a superuser)
--    sees every notification; any other caller sees those whose sent_by is
--    its own role or a role it is a member of (one it could SET ROLE to).
--    The sending role, in _caller(): the role of the session, that is the
--    role set with SET ROLE (or SET LOCAL ROLE) when there is one, else the
--    login (session_user). A SECURITY DEFINER function sees current_user as
--    its owner, so current_user cannot be used; the role GUC is what SET
--    ROLE set, and PostgreSQL lets a session set it only to a role its login
--    is a member of, so it cannot be forged. Stored as the role's name, not
--    its oid: roles have their own oids on each node of a multi-master
--    cluster, and the notifications table replicates. Notifications sent
--    before this migration have no sender: only admins see them.
-- 2. create_channel() defaults to 10 attempts from 10 seconds: the waits of
--    pgrelay._backoff between the first and the last attempt add up to
--    10 s x (2^9 - 1) = 5110 s nominal, 4088 s at the lowest jitter (0.8):
--    more than an hour (docs/notifier.md). 5 attempts from 1 second gave up
--    after about 15 seconds of SMTP trouble.

ALTER TABLE pgrelay_notifier.notifications ADD COLUMN sent_by text NULL;
COMMENT ON COLUMN pgrelay_notifier.notifications.sent_by IS
  'the role that called send(): SET ROLE''s role, else the login; only it, its members and admins see and cancel the notification (NULL before migration 0014: admins only)';

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

-- send: 0009's, and the sending role recorded in sent_by.
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
    (channel, from_addr, to_addrs, cc_addrs, bcc_addrs, subject, body_text, body_html, headers, sent_by)
  VALUES (p_channel, v_from, p_to, COALESCE(p_cc, '{}'), COALESCE(p_bcc, '{}'), p_subject, p_body_text,
          p_body_html, COALESCE(p_headers, '{}'), pgrelay_notifier._caller())
  RETURNING notification_id INTO v_id;
  PERFORM pgrelay_notifier._event(v_id, p_channel, 'queued', NULL);
  PERFORM pgrelay.notify(p_channel, v_id::text);
  RETURN v_id;
END
$$;


-- get_status: queued, sending, sent, failed or cancelled, for a notification
-- the caller may see (_may_see); NULL for any other id, as for an unknown one.
CREATE OR REPLACE FUNCTION pgrelay_notifier.get_status(p_notification_id bigint) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT n.status FROM pgrelay_notifier.notifications n
   WHERE n.notification_id = p_notification_id AND pgrelay_notifier._may_see(n.sent_by)
$$;

-- cancel: a queued notification the caller may see (_may_see) is not sent;
-- returns false when it was not queued any more (sending started, or it
-- ended), does not exist, or is not the caller's to see.
CREATE OR REPLACE FUNCTION pgrelay_notifier.cancel(p_notification_id bigint) RETURNS bool
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
  PERFORM pgrelay_notifier._event(p_notification_id, v_channel, 'cancelled', NULL);
  RETURN true;
END
$$;

-- create_channel: 0004's, with email defaults that outlast an hour of SMTP
-- trouble: 10 attempts from 10 seconds (see the top of this file).
CREATE OR REPLACE FUNCTION pgrelay_notifier.create_channel(
  p_channel text,
  p_from text,
  p_concurrency_mode text DEFAULT 'none',
  p_deduplicate bool DEFAULT false,
  p_node_restricted bool DEFAULT false,
  p_max_attempts int DEFAULT 10,
  p_retry_delay interval DEFAULT '10 seconds',
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

-- As in 0004 and 0009: CREATE on the schema is lent for the ownership
-- transfer only (a non-superuser owner needs it to give the role a function).
GRANT CREATE ON SCHEMA pgrelay_notifier TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier._caller() OWNER TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier._may_see(text) OWNER TO pgrelay_notifier;
REVOKE CREATE ON SCHEMA pgrelay_notifier FROM pgrelay_notifier;
REVOKE ALL ON FUNCTION pgrelay_notifier._caller(), pgrelay_notifier._may_see(text) FROM PUBLIC;
