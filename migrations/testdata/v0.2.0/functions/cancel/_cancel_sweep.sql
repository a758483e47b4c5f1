-- _cancel_sweep: the Processor's janitor applies the requests this node
-- can apply now: those that arrived from another node (applying them in the
-- replication's own transaction would not replicate the outcome: changes
-- made while applying another node's are not forwarded), and those of
-- events that were running when they came (a claim released or rescued
-- since, a retry a failure enqueued before its completion saw the
-- request). It forgets those older than an hour whose event has no row
-- here any more.

CREATE OR REPLACE FUNCTION pgrelay._cancel_sweep() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_origin bigint;
  n int := 0;
BEGIN
  FOR v_origin IN SELECT c.origin_id FROM pgrelay.cancels c ORDER BY c.origin_id LOOP
    IF pgrelay._cancel_apply(v_origin) THEN
      n := n + 1;
    END IF;
  END LOOP;
  DELETE FROM pgrelay.cancels c
   WHERE c.requested_at < pg_catalog.now() - interval '1 hour'
     AND NOT EXISTS (SELECT FROM pgrelay.queue q
                      WHERE (q.id = c.origin_id AND q.origin_id = c.origin_id)
                         OR (q.origin_id = c.origin_id AND q.retry_of IS NOT NULL));
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._cancel_sweep() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._cancel_sweep() TO pgrelay_processor;
