-- _priority_of: p_priority as stored, or PR009.

CREATE OR REPLACE FUNCTION pgrelay._priority_of(p_priority integer) RETURNS smallint
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_priority < -32768 OR p_priority > 32767 THEN
    RAISE EXCEPTION 'pgrelay.notify: p_priority must be between -32768 and 32767, got %', p_priority
      USING ERRCODE = 'PR009', HINT = 'Higher runs first; NULL takes the channel''s default.';
  END IF;
  RETURN p_priority::smallint;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._priority_of(integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
