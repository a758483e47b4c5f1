-- _trim_log: deletes up to p_batch log rows older than p_older_than, oldest
-- first per node, by the (node, id) index (ids carry their creation time).
-- Retention keeps what the NATS publisher has not published: a node with a
-- log publish cursor has a publisher, and its rows past the cursor are kept,
-- unless older than p_unpublished_max (at least p_older_than; NULL: kept for
-- as long as it takes). Those are deleted all the same, recorded in
-- pgrelay.log_dropped, and returned in dropped (of deleted) with the
-- smallest and largest id.

CREATE OR REPLACE FUNCTION pgrelay._trim_log(p_older_than interval, p_batch integer, p_unpublished_max interval DEFAULT NULL::interval) RETURNS TABLE(deleted integer, dropped integer, dropped_first bigint, dropped_last bigint)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_floor bigint := pgrelay._id_floor(now() - p_older_than);
  v_cap bigint;
  v_node int;
  v_cur bigint;
  v_upto bigint;
  v_left int := p_batch;
  n int;
  r record;
BEGIN
  deleted := 0;
  dropped := 0;
  IF p_unpublished_max IS NOT NULL THEN
    v_cap := LEAST(v_floor, pgrelay._id_floor(now() - p_unpublished_max));
  END IF;
  -- The nodes that wrote log rows: a loose scan of the (node, id) index.
  FOR v_node IN
    WITH RECURSIVE ns AS (
      SELECT (SELECT min(l.node) FROM pgrelay.log l) AS node
      UNION ALL
      SELECT (SELECT min(l.node) FROM pgrelay.log l WHERE l.node > ns.node) FROM ns WHERE ns.node IS NOT NULL
    )
    SELECT ns.node FROM ns WHERE ns.node IS NOT NULL
  LOOP
    EXIT WHEN v_left <= 0;
    v_cur := NULL;
    SELECT c.last_id INTO v_cur FROM pgrelay.publish_cursors c WHERE c.node_id = v_node AND c.source = 'log';
    -- Published (or no publisher) and past the retention: one index range,
    -- so that rows held back are not read again at every call.
    -- (The row comparisons keep the generic plan on log_node_id: with
    -- x.node = v_node the planner may walk the primary key instead, through
    -- every other node's rows; TestExplainTrimLogUsesNodeIndex.)
    v_upto := CASE WHEN v_cur IS NULL THEN v_floor ELSE LEAST(v_floor, v_cur + 1) END;
    DELETE FROM pgrelay.log l
     WHERE l.id = ANY (ARRAY(SELECT x.id FROM pgrelay.log x
                              WHERE (x.node, x.id) >= (v_node, 0::bigint) AND (x.node, x.id) < (v_node, v_upto)
                              ORDER BY x.node, x.id LIMIT v_left));
    GET DIAGNOSTICS n = ROW_COUNT;
    deleted := deleted + n;
    v_left := v_left - n;
    -- Unpublished and past the cap.
    IF v_cur IS NOT NULL AND v_cap IS NOT NULL AND v_left > 0 THEN
      WITH x AS (
        DELETE FROM pgrelay.log l
         WHERE l.id = ANY (ARRAY(SELECT x.id FROM pgrelay.log x
                                  WHERE (x.node, x.id) > (v_node, v_cur) AND (x.node, x.id) < (v_node, v_cap)
                                  ORDER BY x.node, x.id LIMIT v_left))
        RETURNING l.id, l.at
      )
      SELECT count(*)::int AS rows, min(x.id) AS first_id, max(x.id) AS last_id, min(x.at) AS first_at,
             max(x.at) AS last_at
        INTO r FROM x;
      IF r.rows > 0 THEN
        INSERT INTO pgrelay.log_dropped (node, rows, first_id, last_id, first_at, last_at)
        VALUES (v_node, r.rows, r.first_id, r.last_id, r.first_at, r.last_at);
        deleted := deleted + r.rows;
        dropped := dropped + r.rows;
        v_left := v_left - r.rows;
        dropped_first := LEAST(dropped_first, r.first_id);
        dropped_last := GREATEST(dropped_last, r.last_id);
      END IF;
    END IF;
  END LOOP;
  RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._trim_log(interval, integer, interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._trim_log(p_older_than interval, p_batch integer, p_unpublished_max interval) TO pgrelay_processor;
