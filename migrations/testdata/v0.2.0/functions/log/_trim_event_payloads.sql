-- _trim_event_payloads: deletes up to p_batch kept payloads older than
-- p_older_than whose queue row is gone and that no publisher may still need:
-- with publishers (log publish cursors), only payloads of events up to the
-- least advanced cursor, or older than p_unpublished_max (as in _trim_log).

CREATE OR REPLACE FUNCTION pgrelay._trim_event_payloads(p_older_than interval, p_batch integer, p_unpublished_max interval DEFAULT NULL::interval) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_floor bigint := pgrelay._id_floor(now() - p_older_than);
  v_published bigint;
  n int;
BEGIN
  SELECT min(c.last_id) INTO v_published FROM pgrelay.publish_cursors c WHERE c.source = 'log';
  IF v_published IS NOT NULL THEN
    v_floor := LEAST(v_floor, GREATEST(v_published + 1,
      CASE WHEN p_unpublished_max IS NOT NULL THEN pgrelay._id_floor(now() - p_unpublished_max) END));
  END IF;
  DELETE FROM pgrelay.event_payloads e
   WHERE e.queue_id IN (SELECT x.queue_id FROM pgrelay.event_payloads x
                         WHERE x.queue_id < v_floor
                           AND NOT EXISTS (SELECT FROM pgrelay.queue q WHERE q.id = x.queue_id)
                         ORDER BY x.queue_id LIMIT p_batch);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._trim_event_payloads(interval, integer, interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._trim_event_payloads(p_older_than interval, p_batch integer, p_unpublished_max interval) TO pgrelay_processor;
