-- cancel: ends event p_id (the id notify() returned) if it has not ended
-- and the caller may: an admin any event, a producer those its role
-- enqueued (as pgrelay_notifier._may_see decides for emails). Returns
-- whether it had not ended: a pending, delayed or retrying event ends
-- 'cancelled' here or, on a cluster, on the node that runs it; a running one
-- finishes its attempt (a success stays 'succeeded', a failure ends
-- 'cancelled'). False for an event that ended, an unknown one, or one that
-- is not the caller's.

CREATE OR REPLACE FUNCTION pgrelay.cancel(p_id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_by text;
BEGIN
  SELECT q.enqueued_by INTO v_by
    FROM pgrelay.queue q
   WHERE (q.id = p_id AND q.origin_id = p_id) OR (q.origin_id = p_id AND q.retry_of IS NOT NULL)
   ORDER BY q.attempt DESC
   LIMIT 1;
  IF NOT FOUND OR NOT pgrelay_notifier._may_see(v_by) THEN
    RETURN false;
  END IF;
  PERFORM pgrelay._cancel_request(p_id, pgrelay_notifier._caller());
  RETURN true;
END
$$;

REVOKE ALL ON FUNCTION pgrelay.cancel(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.cancel(p_id bigint) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay.cancel(p_id bigint) TO pgrelay_admin;
