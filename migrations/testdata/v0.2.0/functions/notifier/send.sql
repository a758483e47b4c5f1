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

CREATE OR REPLACE FUNCTION pgrelay_notifier.send(p_channel text, p_to text[], p_subject text, p_body_text text, p_body_html text DEFAULT NULL::text, p_cc text[] DEFAULT NULL::text[], p_bcc text[] DEFAULT NULL::text[], p_headers jsonb DEFAULT NULL::jsonb) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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

ALTER FUNCTION pgrelay_notifier.send(text, text[], text, text, text, text[], text[], jsonb) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.send(text, text[], text, text, text, text[], text[], jsonb) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier.send(p_channel text, p_to text[], p_subject text, p_body_text text, p_body_html text, p_cc text[], p_bcc text[], p_headers jsonb) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay_notifier.send(p_channel text, p_to text[], p_subject text, p_body_text text, p_body_html text, p_cc text[], p_bcc text[], p_headers jsonb) TO pgrelay_admin;
