-- _heartbeat: marks a Processor instance and its node alive (and clears a
-- tombstone, as _processor_start). Returns false when the instance's row was
-- gone (it was presumed dead and its claims were taken back); the row is
-- then recreated.

CREATE OR REPLACE FUNCTION pgrelay._heartbeat(p_processor bigint, p_mode text, p_hostname text, p_pid integer, p_version text) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_alive bool;
BEGIN
  UPDATE pgrelay.processors p SET last_seen = now() WHERE p.processor_id = p_processor;
  v_alive := FOUND;
  IF NOT v_alive THEN
    INSERT INTO pgrelay.processors (processor_id, node_id, mode, hostname, pid, version)
    VALUES (p_processor, v_node, p_mode, p_hostname, p_pid, p_version);
  END IF;
  INSERT INTO pgrelay.nodes (node_id, mode, hostname, version)
  VALUES (v_node, p_mode, p_hostname, p_version)
  ON CONFLICT (node_id) DO UPDATE
    SET last_seen = now(), mode = EXCLUDED.mode, hostname = EXCLUDED.hostname,
        version = EXCLUDED.version, decommissioned_at = NULL;
  RETURN v_alive;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._heartbeat(bigint, text, text, integer, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._heartbeat(p_processor bigint, p_mode text, p_hostname text, p_pid integer, p_version text) TO pgrelay_processor;
