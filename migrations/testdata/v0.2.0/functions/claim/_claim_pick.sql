-- _claim_pick: locks (FOR UPDATE SKIP LOCKED) and returns up to p_limit ready
-- rows of a 'none' channel in the order of priorities: the rows above 0
-- (queue_priority), those of 0 (queue_ready), those below 0. Only for a
-- channel with rows of a priority other than 0: the others take their rows
-- in one statement, as before.

CREATE OR REPLACE FUNCTION pgrelay._claim_pick(p_channel text, p_node integer, p_all boolean, p_own boolean, p_limit integer) RETURNS SETOF bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_left int := p_limit;
  v_n int;
BEGIN
  RETURN QUERY
  SELECT q.id FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.priority > 0 AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
   ORDER BY q.priority DESC, q.not_before, q.id
   LIMIT v_left
     FOR UPDATE SKIP LOCKED;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  v_left := v_left - v_n;
  IF v_left <= 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT q.id FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.not_before <= now() AND q.priority = 0
     AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
   ORDER BY q.not_before, q.id
   LIMIT v_left
     FOR UPDATE SKIP LOCKED;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  v_left := v_left - v_n;
  IF v_left <= 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT q.id FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.priority < 0 AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
   ORDER BY q.priority DESC, q.not_before, q.id
   LIMIT v_left
     FOR UPDATE SKIP LOCKED;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_pick(text, integer, boolean, boolean, integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_pick(p_channel text, p_node integer, p_all boolean, p_own boolean, p_limit integer) TO pgrelay_processor;
