-- _lease_release: a leader stopping cleanly gives the lease up at once, so
-- another node can take over without waiting for it to run out: its bid runs
-- out now. The bid is locked first and then checked, so a renewal by another
-- Processor of the node that committed meanwhile is seen.

CREATE OR REPLACE FUNCTION pgrelay._lease_release(p_term bigint) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM FROM pgrelay.leader_leases b WHERE b.node_id = pgrelay._this_node() FOR UPDATE;
  IF NOT pgrelay._holds_lease(p_term, now()) THEN
    RETURN false;
  END IF;
  UPDATE pgrelay.leader_leases b SET lease_until = now() WHERE b.node_id = pgrelay._this_node();
  RETURN true;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._lease_release(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._lease_release(p_term bigint) TO pgrelay_processor;
