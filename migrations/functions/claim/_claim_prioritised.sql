-- _claim_prioritised: whether channel p_channel has rows not dispatched of
-- a priority other than 0 (one probe of queue_priority). PL/pgSQL, whose
-- plan the session keeps: every claim of a 'none' channel asks, and an SQL
-- function with a query in it is planned at every call
-- (TestHotFunctionsKeepTheirPlans).

CREATE OR REPLACE FUNCTION pgrelay._claim_prioritised(p_channel text) RETURNS bool
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN EXISTS (SELECT FROM pgrelay.queue q
                  WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.priority <> 0);
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_prioritised(text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_prioritised(p_channel text) TO pgrelay_processor;
