-- nodes_overview: what `pgrelay nodes` shows, one row per node; a
-- decommissioned node is never alive. Runs as its caller: every role allowed
-- to call it may read what it reads.

CREATE OR REPLACE FUNCTION pgrelay.nodes_overview(p_dead_after interval DEFAULT '00:00:10'::interval) RETURNS TABLE(node_id integer, mode text, last_seen timestamp with time zone, alive boolean, leader boolean, processors bigint, pending bigint, pinned bigint, hostname text, version text, decommissioned_at timestamp with time zone)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  WITH q AS (
    SELECT COALESCE(q.run_in_node, q.owner_node) AS node,
           count(*) FILTER (WHERE q.run_in_node IS NULL) AS pending,
           count(*) FILTER (WHERE q.run_in_node IS NOT NULL) AS pinned
      FROM pgrelay.queue q WHERE q.dispatched_at IS NULL
     GROUP BY 1
  )
  SELECT n.node_id, n.mode, n.last_seen,
         n.last_seen >= now() - p_dead_after AND n.decommissioned_at IS NULL,
         COALESCE((SELECT h.leader_node = n.node_id FROM pgrelay._lease_holder(now()) h), false),
         (SELECT count(*) FROM pgrelay.processors p WHERE p.node_id = n.node_id),
         COALESCE(q.pending, 0), COALESCE(q.pinned, 0), n.hostname, n.version, n.decommissioned_at
    FROM pgrelay.nodes n LEFT JOIN q ON q.node = n.node_id
   WHERE n.node_id >= 0
   ORDER BY n.node_id
$$;

REVOKE ALL ON FUNCTION pgrelay.nodes_overview(interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.nodes_overview(p_dead_after interval) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay.nodes_overview(p_dead_after interval) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay.nodes_overview(p_dead_after interval) TO pgrelay_viewer;
