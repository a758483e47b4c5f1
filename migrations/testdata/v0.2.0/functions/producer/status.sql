-- ---------------------------------------------------------------------------
-- status() knows cancelled
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pgrelay.status(p_id bigint) RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v text;
BEGIN
  SELECT CASE WHEN q.dispatched_at IS NOT NULL THEN 'in_flight'
              WHEN q.attempt > 1 THEN 'retrying'
              ELSE 'pending' END
    INTO v
    FROM pgrelay.queue q
   WHERE (q.id = p_id AND q.origin_id = p_id)
      OR (q.origin_id = p_id AND q.retry_of IS NOT NULL)
   ORDER BY q.attempt DESC
   LIMIT 1;
  IF FOUND THEN
    RETURN v;
  END IF;
  SELECT l.event INTO v
    FROM pgrelay.log l
   WHERE l.origin_id = p_id AND l.event IN ('succeeded', 'gave_up', 'expired', 'deduplicated', 'cancelled')
   ORDER BY l.id DESC
   LIMIT 1;
  RETURN v;
END
$$;

REVOKE ALL ON FUNCTION pgrelay.status(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.status(p_id bigint) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay.status(p_id bigint) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay.status(p_id bigint) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay.status(p_id bigint) TO pgrelay_viewer;
