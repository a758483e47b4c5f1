-- _record_node: records the caller's node id (its pg_relay.node_id) as this
-- node's; returns the id recorded before. Run by every Processor as it
-- starts and by `pgrelay migrate`. SECURITY DEFINER: no role may write
-- pgrelay.this_node itself.

CREATE OR REPLACE FUNCTION pgrelay._record_node() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_new int := pgrelay._node_setting();
  v_old int;
BEGIN
  SELECT t.node_id INTO v_old FROM pgrelay.this_node t;
  IF v_old IS DISTINCT FROM v_new THEN
    INSERT INTO pgrelay.this_node AS t (node_id) VALUES (v_new)
    ON CONFLICT (singleton) DO UPDATE SET node_id = excluded.node_id, updated_at = now();
  END IF;
  RETURN COALESCE(v_old, v_new);
END
$$;

REVOKE ALL ON FUNCTION pgrelay._record_node() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._record_node() TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay._record_node() TO pgrelay_processor;
