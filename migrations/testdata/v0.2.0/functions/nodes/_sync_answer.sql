-- _sync_answer: this node answers the asks of other nodes it has not answered
-- yet (a heartbeat's work; it writes nothing when there is nothing new).
-- Returns how many it answered.

CREATE OR REPLACE FUNCTION pgrelay._sync_answer() RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_horizon bigint;
  n int;
BEGIN
  IF NOT EXISTS (SELECT FROM pgrelay.sync_asks a
                  WHERE a.node_id <> v_node
                    AND NOT EXISTS (SELECT FROM pgrelay.sync_answers x
                                     WHERE x.node_id = a.node_id AND x.peer = v_node AND x.term >= a.term)) THEN
    RETURN 0;
  END IF;
  BEGIN
    v_horizon := pgrelay._publish_horizon();
  EXCEPTION WHEN SQLSTATE 'PR040' THEN
    v_horizon := NULL;
  END;
  INSERT INTO pgrelay.sync_answers AS s (node_id, peer, term, knows, horizon)
  SELECT a.node_id, v_node, a.term, pgrelay._adopters(), v_horizon
    FROM pgrelay.sync_asks a
   WHERE a.node_id <> v_node
     AND NOT EXISTS (SELECT FROM pgrelay.sync_answers x
                      WHERE x.node_id = a.node_id AND x.peer = v_node AND x.term >= a.term)
  ON CONFLICT (node_id, peer) DO UPDATE
    SET term = EXCLUDED.term, knows = EXCLUDED.knows, horizon = EXCLUDED.horizon, answered_at = now()
    WHERE s.term < EXCLUDED.term;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._sync_answer() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._sync_answer() TO pgrelay_processor;
