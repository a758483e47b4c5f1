-- _trim_event_traces deletes up to p_batch traces older than p_older_than
-- (by their origin id's time) whose event has no queue row left (the
-- Processor's janitor, with the log's retention).

CREATE OR REPLACE FUNCTION pgrelay._trim_event_traces(p_older_than interval, p_batch integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n int;
BEGIN
  DELETE FROM pgrelay.event_traces t
   WHERE t.origin_id IN (SELECT x.origin_id FROM pgrelay.event_traces x
                          WHERE x.origin_id < pgrelay._id_floor(now() - p_older_than)
                            AND NOT EXISTS (SELECT FROM pgrelay.queue q WHERE q.id = x.origin_id)
                            AND NOT EXISTS (SELECT FROM pgrelay.queue q
                                             WHERE q.origin_id = x.origin_id AND q.retry_of IS NOT NULL)
                          ORDER BY x.origin_id LIMIT p_batch);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._trim_event_traces(interval, integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._trim_event_traces(p_older_than interval, p_batch integer) TO pgrelay_processor;
