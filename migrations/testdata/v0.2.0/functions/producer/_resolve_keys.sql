-- _resolve_keys: decides this node's held events that it can (those it
-- owns: an adopter decides the ones it adopted), asks again when some wait
-- and the peers answered the last ask; returns how many it decided. A
-- Processor's heartbeat calls it (multi-node and leader mode).

CREATE OR REPLACE FUNCTION pgrelay._resolve_keys(p_dead_after interval) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_term bigint;
  v_proven bigint;
  v_waiting boolean := false;
  v_survivor bigint;
  h record;
  n int := 0;
BEGIN
  IF NOT EXISTS (SELECT FROM pgrelay.unique_keys k WHERE k.held) THEN
    RETURN 0;
  END IF;
  SELECT a.term INTO v_term FROM pgrelay.sync_asks a WHERE a.node_id = v_node;
  -- The lowest horizon of the live peers (NULL when one has none); every
  -- id when there is no peer.
  SELECT CASE WHEN bool_and(s.horizon IS NOT NULL) THEN min(s.horizon) END INTO v_proven
    FROM pgrelay._sync_peers(COALESCE(v_term, 0), p_dead_after) p
    LEFT JOIN pgrelay.sync_answers s ON s.node_id = v_node AND s.peer = p.peer
   WHERE p.alive
  HAVING count(*) > 0;
  IF NOT FOUND THEN
    v_proven := 9223372036854775807;
  END IF;
  FOR h IN
    SELECT u.*, q.priority FROM pgrelay.unique_keys u
      JOIN pgrelay.queue q ON q.id = u.origin_id
     WHERE u.held AND q.owner_node = v_node AND q.dispatched_at IS NULL
     ORDER BY u.origin_id
       FOR UPDATE OF u, q
  LOOP
    IF NOT COALESCE(h.origin_id < v_proven, h.at < now() - p_dead_after) THEN
      v_waiting := true;
      CONTINUE;
    END IF;
    SELECT min(x.origin_id) INTO v_survivor
      FROM pgrelay.unique_keys x
     WHERE x.channel = h.channel AND x.key_hash = h.key_hash AND x.key = h.key
       AND (x.until > now() OR pgrelay._event_open(x.origin_id));
    IF v_survivor = h.origin_id THEN
      UPDATE pgrelay.queue q SET not_before = h.due WHERE q.id = h.origin_id;
      UPDATE pgrelay.unique_keys x SET held = false, due = NULL WHERE x.origin_id = h.origin_id;
    ELSE
      DELETE FROM pgrelay.queue q WHERE q.id = h.origin_id;
      DELETE FROM pgrelay.unique_keys x WHERE x.origin_id = h.origin_id;
      INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node, priority)
      VALUES (h.origin_id, h.origin_id, h.channel, 1, 'deduplicated',
              pg_catalog.format('deduplicated: event %s holds the key (the lowest id of its key across the cluster)',
                                v_survivor), v_node, NULLIF(h.priority, 0));
    END IF;
    n := n + 1;
  END LOOP;
  IF v_waiting AND (v_term IS NULL OR NOT EXISTS (
        SELECT FROM pgrelay._sync_peers(v_term, p_dead_after) p WHERE p.alive AND NOT p.answered)) THEN
    PERFORM pgrelay._sync_ask();
  END IF;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._resolve_keys(interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._resolve_keys(p_dead_after interval) TO pgrelay_processor;
