-- _adopters: the nodes of this node's pgrelay.nodes that may adopt work:
-- every node but the lease row, decommissioned nodes and single-mode nodes
-- (as _adopt picks its adopter, less the liveness a stale copy cannot tell).

CREATE OR REPLACE FUNCTION pgrelay._adopters() RETURNS integer[]
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE(pg_catalog.array_agg(n.node_id ORDER BY n.node_id), '{}')
    FROM pgrelay.nodes n
   WHERE pgrelay._may_adopt(n)
$$;

REVOKE ALL ON FUNCTION pgrelay._adopters() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._adopters() TO pgrelay_processor;
