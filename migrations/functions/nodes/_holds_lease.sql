-- _holds_lease: whether this node holds the leader lease of term p_term at
-- p_at (the lease runs past it): the one place of leader mode's fencing
-- rule. The claims ask at now() (_claim_scope), a direct batch just before
-- it records its outcomes at clock_timestamp() (_batch_fence),
-- _lease_release with its bid locked. PL/pgSQL, whose plan the session
-- keeps (TestHotFunctionsKeepTheirPlans): a leader asks at every claim and
-- batch.

CREATE OR REPLACE FUNCTION pgrelay._holds_lease(p_term bigint, p_at timestamp with time zone) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN EXISTS (SELECT FROM pgrelay._lease_holder(p_at) h
                  WHERE h.leader_node = pgrelay._this_node() AND h.term = p_term);
END
$$;

REVOKE ALL ON FUNCTION pgrelay._holds_lease(bigint, timestamp with time zone) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._holds_lease(p_term bigint, p_at timestamp with time zone) TO pgrelay_processor;
