-- _unique_for: p_unique_for checked (PR024): NULL, or more than zero and at
-- most 10 years.

CREATE OR REPLACE FUNCTION pgrelay._unique_for(p_unique_for interval) RETURNS interval
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_unique_for <= interval '0' OR p_unique_for > interval '3650 days' THEN
    RAISE EXCEPTION 'pgrelay.notify: p_unique_for must be more than zero and at most 3650 days, got %', p_unique_for
      USING ERRCODE = 'PR024';
  END IF;
  RETURN p_unique_for;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._unique_for(interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
