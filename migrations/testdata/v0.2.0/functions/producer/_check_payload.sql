-- _check_payload: raises the error of a payload _payload_ok refuses.

CREATE OR REPLACE FUNCTION pgrelay._check_payload(p_channel text, p_payload text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF pgrelay._payload_ok(p_payload) THEN
    RETURN;
  END IF;
  IF p_payload IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify: payload for channel % must not be NULL (use an empty string)',
      pg_catalog.quote_literal(p_channel) USING ERRCODE = 'PR005';
  END IF;
  RAISE EXCEPTION 'pgrelay.notify: payload for channel % is % bytes, over the 1 MiB (1048576 bytes) limit',
    pg_catalog.quote_literal(p_channel), pg_catalog.octet_length(p_payload) USING ERRCODE = 'PR006';
END
$$;

REVOKE ALL ON FUNCTION pgrelay._check_payload(text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
