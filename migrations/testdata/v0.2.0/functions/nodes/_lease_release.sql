-- _lease_release: a leader stopping cleanly gives the lease up at once, so
-- another node can take over without waiting for it to run out. The lease
-- row is locked first and then checked, so a take that committed meanwhile
-- is seen (and left alone).

CREATE OR REPLACE FUNCTION pgrelay._lease_release(p_term bigint) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM FROM pgrelay.nodes n WHERE n.node_id = -1 FOR UPDATE;
  IF NOT pgrelay._holds_lease(p_term, now()) THEN
    RETURN false;
  END IF;
  UPDATE pgrelay.nodes n SET lease_until = now() WHERE n.node_id = -1;
  RETURN true;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._lease_release(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._lease_release(p_term bigint) TO pgrelay_processor;
