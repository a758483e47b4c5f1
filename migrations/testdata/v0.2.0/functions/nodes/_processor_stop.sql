-- _processor_stop: a clean stop: releases whatever the instance still holds and
-- removes its row.

CREATE OR REPLACE FUNCTION pgrelay._processor_stop(p_processor bigint) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n int;
BEGIN
  UPDATE pgrelay.queue q SET dispatched_at = NULL, dispatched_by = NULL
   WHERE q.dispatched_by = p_processor AND q.dispatched_at IS NOT NULL;
  GET DIAGNOSTICS n = ROW_COUNT;
  DELETE FROM pgrelay.processors p WHERE p.processor_id = p_processor;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._processor_stop(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._processor_stop(p_processor bigint) TO pgrelay_processor;
