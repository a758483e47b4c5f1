-- _lease: one step of the leader election of --mode leader, run on every
-- heartbeat. The holder renews its lease; anyone takes a lease that is free or
-- has run out, with a term above every term it has seen. Each node writes
-- only its own bid (pgrelay.leader_leases); who holds the lease is
-- _lease_holder's rule. Returns the lease as this node now sees it; taken is
-- true when this call took it. A node that took the lease must not act as the
-- leader before it has waited longer than the replication lag and seen the
-- lease still its own, with the same term: a take on another node at the same
-- moment reaches it meanwhile, and the rule then names the same holder on
-- both. Reading the lease without a step is _lease_holder's.

CREATE OR REPLACE FUNCTION pgrelay._lease(p_duration interval) RETURNS TABLE(leader_node integer, term bigint, lease_until timestamp with time zone, mine boolean, taken boolean)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  h record;
BEGIN
  taken := false;
  IF p_duration IS NULL OR p_duration <= interval '0' THEN
    RAISE EXCEPTION 'pgrelay._lease: the lease''s duration must be positive, got %', p_duration
      USING ERRCODE = '22023';
  END IF;
  -- This node's Processors step one at a time: the bid is locked, or,
  -- before the node's first bid, the insert of it waits for another's.
  PERFORM FROM pgrelay.leader_leases b WHERE b.node_id = v_node FOR UPDATE;
  SELECT * INTO h FROM pgrelay._lease_holder(now());
  IF h.leader_node = v_node THEN
    UPDATE pgrelay.leader_leases b SET lease_until = now() + p_duration WHERE b.node_id = v_node;
  ELSIF h.leader_node IS NULL THEN
    INSERT INTO pgrelay.leader_leases AS b (node_id, term, lease_until, taken_at)
    SELECT v_node, COALESCE(max(x.term), 0) + 1, now() + p_duration, now() FROM pgrelay.leader_leases x
    ON CONFLICT (node_id) DO UPDATE
      SET term = EXCLUDED.term, lease_until = EXCLUDED.lease_until, taken_at = EXCLUDED.taken_at;
    taken := true;
  ELSE
    -- Another node holds it: a bid of this node still running was deposed
    -- by a later term, and ends now (else it would name this node again
    -- once the later one ends).
    UPDATE pgrelay.leader_leases b SET lease_until = now() WHERE b.node_id = v_node AND b.lease_until > now();
  END IF;
  SELECT * INTO h FROM pgrelay._lease_holder(now());
  leader_node := h.leader_node;
  term := h.term;
  lease_until := h.lease_until;
  mine := COALESCE(h.leader_node = v_node, false);
  RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._lease(interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._lease(p_duration interval) TO pgrelay_processor;
