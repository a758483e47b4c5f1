-- _holds_lease: whether this node holds the leader lease of term p_term at
-- p_at (the lease runs past it): the one place of leader mode's fencing
-- rule. The claims ask at now() (_claim_scope), a direct batch just before
-- it records its outcomes at clock_timestamp() (_batch_fence),
-- _lease_release with the lease row locked. PL/pgSQL, whose plan the session
-- keeps (TestHotFunctionsKeepTheirPlans): a leader asks at every claim and
-- batch.

CREATE OR REPLACE FUNCTION pgrelay._holds_lease(p_term bigint, p_at timestamp with time zone) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN EXISTS (SELECT FROM pgrelay.nodes l
                  WHERE l.node_id = -1 AND l.leader_node = pgrelay._this_node() AND l.term = p_term
                    AND l.lease_until > p_at);
END
$$;

REVOKE ALL ON FUNCTION pgrelay._holds_lease(bigint, timestamp with time zone) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._holds_lease(p_term bigint, p_at timestamp with time zone) TO pgrelay_processor;
