-- _check_headers: p_headers is NULL or a JSON object of custom headers whose
-- values are strings: RFC 5322 field names (printable ASCII but ':'), values
-- without CR or LF (no header injection), none of the headers the handler
-- writes itself, and at most 50 custom headers of at most
-- 16 KiB (16 384 bytes) of names and values together.

CREATE OR REPLACE FUNCTION pgrelay_notifier._check_headers(p_headers jsonb) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
$_$;

ALTER FUNCTION pgrelay_notifier._check_headers(jsonb) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier._check_headers(jsonb) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
