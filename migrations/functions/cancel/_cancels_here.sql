-- Whether this node ends the rows of an event it is asked to cancel: the
-- one that may claim them. A database without other live nodes does; a
-- pinned row's node; else the holder of a live leader lease, or the row's
-- owner. In multi-node mode that is the node that claims it; in leader mode
-- the leader (docs/multi-master.md says what holds when the lease moves).

CREATE OR REPLACE FUNCTION pgrelay._cancels_here(p_run_in_node integer, p_owner_node integer) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE
    WHEN NOT EXISTS (SELECT FROM pgrelay.nodes n
                      WHERE n.node_id >= 0 AND n.node_id <> pgrelay._this_node() AND n.decommissioned_at IS NULL)
      THEN true
    WHEN p_run_in_node IS NOT NULL THEN p_run_in_node = pgrelay._this_node()
    ELSE COALESCE((SELECT h.leader_node FROM pgrelay._lease_holder(pg_catalog.now()) h), p_owner_node)
         = pgrelay._this_node()
  END
$$;

REVOKE ALL ON FUNCTION pgrelay._cancels_here(integer, integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._cancels_here(p_run_in_node integer, p_owner_node integer) TO pgrelay_processor;
