-- _processor_start: registers a Processor instance and its node. A node that
-- runs again under a decommissioned id is a node again (its tombstone is
-- cleared).

CREATE OR REPLACE FUNCTION pgrelay._processor_start(p_mode text, p_hostname text, p_pid integer, p_version text) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_id bigint := pgrelay._next_id();
  v_node int := pgrelay._this_node();
BEGIN
  INSERT INTO pgrelay.processors (processor_id, node_id, mode, hostname, pid, version)
  VALUES (v_id, v_node, p_mode, p_hostname, p_pid, p_version);
  INSERT INTO pgrelay.nodes (node_id, mode, hostname, version)
  VALUES (v_node, p_mode, p_hostname, p_version)
  ON CONFLICT (node_id) DO UPDATE
    SET last_seen = now(), mode = EXCLUDED.mode, hostname = EXCLUDED.hostname,
        version = EXCLUDED.version, decommissioned_at = NULL;
  RETURN v_id;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._processor_start(text, text, integer, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._processor_start(p_mode text, p_hostname text, p_pid integer, p_version text) TO pgrelay_processor;
