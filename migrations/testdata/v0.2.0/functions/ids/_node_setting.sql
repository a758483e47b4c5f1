-- _node_setting: the session's pg_relay.node_id, 0 when unset. Raises PR020
-- for a value that is not a node id.

CREATE OR REPLACE FUNCTION pgrelay._node_setting() RETURNS integer
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  s text := pg_catalog.current_setting('pg_relay.node_id', true);
  n bigint;
BEGIN
  IF s IS NULL OR pg_catalog.btrim(s) = '' THEN
    RETURN 0;
  END IF;
  IF s !~ '^\s*[0-9]{1,9}\s*$' THEN
    RAISE EXCEPTION 'pgrelay: pg_relay.node_id = % is not an integer between 0 and 1023', pg_catalog.quote_literal(s)
      USING ERRCODE = 'PR020';
  END IF;
  n := pg_catalog.btrim(s)::bigint;
  IF n > 1023 THEN
    RAISE EXCEPTION 'pgrelay: pg_relay.node_id = % is outside 0..1023', n USING ERRCODE = 'PR020';
  END IF;
  RETURN n::int;
END
$_$;

REVOKE ALL ON FUNCTION pgrelay._node_setting() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._node_setting() TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay._node_setting() TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay._node_setting() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._node_setting() TO pgrelay_notifier;
