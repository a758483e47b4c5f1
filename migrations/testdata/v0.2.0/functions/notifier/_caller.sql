-- _caller: the role of the calling session, as send() records it and
-- get_status() and cancel() check it: the role set with SET ROLE (or SET
-- LOCAL ROLE) when there is one, else the login. The same inside any
-- SECURITY DEFINER function, ours or the application's.

CREATE OR REPLACE FUNCTION pgrelay_notifier._caller() RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN pg_catalog.current_setting('role') = 'none' THEN SESSION_USER::text
              ELSE pg_catalog.current_setting('role') END
$$;

ALTER FUNCTION pgrelay_notifier._caller() OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier._caller() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
