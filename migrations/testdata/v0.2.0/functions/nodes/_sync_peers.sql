-- _sync_peers: the peers this node must hear from after its ask of term
-- p_term, whether each answered, and whether it looks alive here (a heartbeat
-- within p_dead_after). The peers: the nodes this node knows may adopt, those
-- its answerers knew, less itself and the nodes it knows decommissioned. No
-- row when there is no peer at all: then nothing is proven (a node that came
-- back may not know yet who adopted its work).

CREATE OR REPLACE FUNCTION pgrelay._sync_peers(p_term bigint, p_dead_after interval) RETURNS TABLE(peer integer, answered boolean, alive boolean)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  WITH me AS (SELECT pgrelay._this_node() AS node),
  answered AS (
    SELECT s.peer, s.knows FROM pgrelay.sync_answers s, me
     WHERE s.node_id = me.node AND s.term >= p_term
  ), peers AS (
    SELECT p.node FROM pg_catalog.unnest(pgrelay._adopters()) AS p(node)
    UNION
    SELECT k.node FROM answered a, pg_catalog.unnest(a.knows) AS k(node)
    UNION
    SELECT a.peer FROM answered a
  )
  SELECT p.node,
         EXISTS (SELECT FROM answered a WHERE a.peer = p.node),
         EXISTS (SELECT FROM pgrelay.nodes n WHERE n.node_id = p.node AND n.last_seen >= now() - p_dead_after)
    FROM peers p, me
   WHERE p.node <> me.node
     AND NOT EXISTS (SELECT FROM pgrelay.nodes d WHERE d.node_id = p.node AND d.decommissioned_at IS NOT NULL)
   ORDER BY p.node
$$;

REVOKE ALL ON FUNCTION pgrelay._sync_peers(bigint, interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._sync_peers(p_term bigint, p_dead_after interval) TO pgrelay_processor;
