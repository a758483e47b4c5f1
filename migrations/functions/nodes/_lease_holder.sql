-- _lease_holder: the leader lease as this node sees it at p_at, the one
-- place of the rule that names the leader. Every node that takes the lease
-- writes its own bid (pgrelay.leader_leases); the holder is the bid that
-- runs past p_at with the highest term, the lowest node id among equal
-- terms: two takes made at the same moment on two nodes name the same
-- holder on both once each has the other's bid. No row when no bid runs.
-- PL/pgSQL, whose plan the session keeps: a leader asks at every claim and
-- batch (_holds_lease).

CREATE OR REPLACE FUNCTION pgrelay._lease_holder(p_at timestamp with time zone) RETURNS TABLE(leader_node integer, term bigint, lease_until timestamp with time zone)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN QUERY SELECT l.node_id, l.term, l.lease_until FROM pgrelay.leader_leases l
                WHERE l.lease_until > p_at
                ORDER BY l.term DESC, l.node_id
                LIMIT 1;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._lease_holder(timestamp with time zone) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._lease_holder(p_at timestamp with time zone) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._lease_holder(p_at timestamp with time zone) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay._lease_holder(p_at timestamp with time zone) TO pgrelay_viewer;
