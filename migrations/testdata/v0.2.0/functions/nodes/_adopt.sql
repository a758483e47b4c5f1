-- _adopt: the unrestricted work of dead nodes (no heartbeat for p_dead_after,
-- or decommissioned) is taken over by exactly one live node: the live node
-- with the smallest id, a choice every node makes the same from the same
-- replicated nodes table. Rows pinned to the dead node are never adopted:
-- they wait for it, or for pgrelay.decommission(). A dead node is looked at
-- again at most every p_dead_after, for rows that reached this node late
-- through replication — a decommissioned node too, for as long as its
-- tombstone stays.

CREATE OR REPLACE FUNCTION pgrelay._adopt(p_dead_after interval) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  d pgrelay.nodes;
  v_adopter int;
  v_procs bigint[];
  n int := 0;
BEGIN
  SELECT min(x.node_id) INTO v_adopter FROM pgrelay.nodes x
   WHERE pgrelay._may_adopt(x) AND x.last_seen >= now() - p_dead_after;
  IF v_adopter IS DISTINCT FROM v_node THEN
    RETURN 0;
  END IF;
  FOR d IN
    SELECT * FROM pgrelay.nodes x
     WHERE x.node_id >= 0 AND x.node_id <> v_node
       AND (x.last_seen < now() - p_dead_after OR x.decommissioned_at IS NOT NULL)
       AND x.mode <> 'single'
       AND (x.adopted_at IS NULL OR x.adopted_at < now() - p_dead_after)
     ORDER BY x.node_id
     FOR UPDATE SKIP LOCKED
  LOOP
    SELECT COALESCE(pg_catalog.array_agg(p.processor_id), '{}') INTO v_procs
      FROM pgrelay.processors p WHERE p.node_id = d.node_id;
    n := n + pgrelay._adopt_rows(d.node_id, v_node, v_procs,
      CASE WHEN d.decommissioned_at IS NOT NULL
           THEN pg_catalog.format('node %s was decommissioned', d.node_id)
           ELSE pg_catalog.format('node %s is dead (no heartbeat for %s)', d.node_id, p_dead_after) END);
    DELETE FROM pgrelay.processors p WHERE p.node_id = d.node_id;
    UPDATE pgrelay.nodes x SET adopted_at = now() WHERE x.node_id = d.node_id;
  END LOOP;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._adopt(interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._adopt(p_dead_after interval) TO pgrelay_processor;
