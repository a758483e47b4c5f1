-- _lease: one step of the leader election of --mode leader, run on every
-- heartbeat. The holder renews its lease; anyone takes a lease that is free or
-- has run out (term + 1). Returns the lease as this node now sees it; taken is
-- true when this call took it. A node that took the lease must not act as the
-- leader before it has waited longer than the replication lag and seen the
-- lease still its own, with the same term (a take on another node at the same
-- moment wins by last update, on both nodes). It must not write the lease row
-- meanwhile: a renewal would be the latest update on its own node, so that
-- node would keep its take whatever the other's. A NULL p_duration reads the
-- lease only (a waiting candidate, the first half of --dead-after).

CREATE OR REPLACE FUNCTION pgrelay._lease(p_duration interval) RETURNS TABLE(leader_node integer, term bigint, lease_until timestamp with time zone, mine boolean, taken boolean)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  l pgrelay.nodes;
BEGIN
  taken := false;
  IF p_duration IS NULL THEN
    SELECT * INTO l FROM pgrelay.nodes n WHERE n.node_id = -1;
  ELSE
    INSERT INTO pgrelay.nodes (node_id, mode, last_seen) VALUES (-1, 'lease', now())
    ON CONFLICT (node_id) DO NOTHING;
    SELECT * INTO l FROM pgrelay.nodes n WHERE n.node_id = -1 FOR UPDATE;
    IF l.leader_node = v_node AND l.lease_until > now() THEN
      UPDATE pgrelay.nodes n SET lease_until = now() + p_duration, last_seen = now()
       WHERE n.node_id = -1 RETURNING * INTO l;
    ELSIF l.lease_until IS NULL OR l.lease_until <= now() THEN
      UPDATE pgrelay.nodes n
         SET leader_node = v_node, term = COALESCE(n.term, 0) + 1, lease_until = now() + p_duration,
             taken_at = now(), last_seen = now()
       WHERE n.node_id = -1 RETURNING * INTO l;
      taken := true;
    END IF;
  END IF;
  leader_node := l.leader_node;
  term := l.term;
  lease_until := l.lease_until;
  mine := COALESCE(l.leader_node = v_node AND l.lease_until > now(), false);
  RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._lease(interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._lease(p_duration interval) TO pgrelay_processor;
