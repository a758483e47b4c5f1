-- _schedules_wake: seconds until the next tick this node may fire (as
-- _schedules_due chooses), 0 or less when one is due or not computed yet,
-- NULL when there is none (or only cron expressions that never match).

CREATE OR REPLACE FUNCTION pgrelay._schedules_wake(p_mode text, p_leader boolean, p_term bigint) RETURNS double precision
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_all bool;
  v_own bool;
  v_next timestamptz;
BEGIN
  SELECT x.all_rows, x.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) x;
  IF v_all THEN
    SELECT min(COALESCE(s.next_fire, '-infinity')) INTO v_next FROM pgrelay.schedule_defs s;
  ELSIF v_own THEN
    SELECT min(COALESCE(s.next_fire, '-infinity')) INTO v_next FROM pgrelay.schedule_defs s
     WHERE s.owner_node = pgrelay._this_node();
  END IF;
  IF v_next IS NULL OR v_next = 'infinity' THEN
    RETURN NULL;  -- none, or only expressions that never match
  ELSIF v_next = '-infinity' THEN
    RETURN 0;
  END IF;
  RETURN pg_catalog.date_part('epoch', v_next - pg_catalog.clock_timestamp());
END
$$;

REVOKE ALL ON FUNCTION pgrelay._schedules_wake(text, boolean, bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._schedules_wake(p_mode text, p_leader boolean, p_term bigint) TO pgrelay_processor;
