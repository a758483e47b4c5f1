-- _schedules_due: the schedules this node may fire in the scope of the
-- claim (_claim_scope: every schedule in single mode and for the leader in
-- leader mode, the node's own in multi-node mode) whose tick is due or not
-- computed yet, locked for the caller's transaction (another Processor's
-- fire in progress is skipped: it advances next_fire). now: the
-- transaction's time, which every fire of it uses.

CREATE OR REPLACE FUNCTION pgrelay._schedules_due(p_mode text, p_leader boolean, p_term bigint, p_limit integer) RETURNS TABLE(name text, cron text, timezone text, next_fire timestamp with time zone, anchor timestamp with time zone, now timestamp with time zone)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_all bool;
  v_own bool;
BEGIN
  SELECT x.all_rows, x.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) x;
  RETURN QUERY
  SELECT s.name, s.cron, s.timezone, s.next_fire, s.anchor, now()
    FROM pgrelay.schedule_defs s
   WHERE (v_all OR (v_own AND s.owner_node = pgrelay._this_node()))
     AND (s.next_fire IS NULL OR s.next_fire <= now())
   ORDER BY s.next_fire NULLS FIRST
   LIMIT p_limit
     FOR UPDATE OF s SKIP LOCKED;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._schedules_due(text, boolean, bigint, integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._schedules_due(p_mode text, p_leader boolean, p_term bigint, p_limit integer) TO pgrelay_processor;
