-- _wake_xids_ended: whether every transaction in progress at p_snapshot
-- (pg_current_snapshot() taken after _arm_wakes committed) has ended.
-- PL/pgSQL, whose plan the session keeps (TestHotFunctionsKeepTheirPlans):
-- an idle claimer asks at every arming.

CREATE OR REPLACE FUNCTION pgrelay._wake_xids_ended(p_snapshot pg_snapshot) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN NOT EXISTS (SELECT FROM pg_catalog.pg_snapshot_xip(p_snapshot) AS x(xid)
                      WHERE pg_catalog.pg_xact_status(x.xid) = 'in progress');
END
$$;

REVOKE ALL ON FUNCTION pgrelay._wake_xids_ended(pg_snapshot) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._wake_xids_ended(p_snapshot pg_snapshot) TO pgrelay_processor;
