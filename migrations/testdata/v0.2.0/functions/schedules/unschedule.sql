-- unschedule: removes schedule p_name; false when there is none.

CREATE OR REPLACE FUNCTION pgrelay.unschedule(p_name text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  DELETE FROM pgrelay.schedule_defs s WHERE s.name = p_name;
  RETURN FOUND;
END
$$;

REVOKE ALL ON FUNCTION pgrelay.unschedule(text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.unschedule(p_name text) TO pgrelay_admin;
