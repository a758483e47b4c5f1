-- set_status_many: moves notifications forward, never back (the conditional
-- update of seed store-patterns item 4: a late 'sending' after 'sent' changes
-- nothing), each notification of p_notification_ids once, in one statement.
-- Allowed moves: queued -> sending; queued | sending -> sent | failed.
-- 'sending' again on a notification already sending is a new attempt:
-- attempts grows, the status does not change. Every change it makes appends
-- one row to status_events; it returns the ids whose status changed, in
-- order. Rows are updated in notification order, so two calls never
-- deadlock on each other.

CREATE OR REPLACE FUNCTION pgrelay_notifier.set_status_many(p_notification_ids bigint[], p_status text, p_error text DEFAULT NULL::text) RETURNS bigint[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_error text := pg_catalog.left(p_error, 8000);
  v_ids bigint[];
  v_channels text[];
BEGIN
  IF p_status IS NULL OR p_status NOT IN ('queued', 'sending', 'sent', 'failed') THEN
    RAISE EXCEPTION 'pgrelay_notifier.set_status: unknown status % (expected sending, sent or failed)',
      COALESCE(pg_catalog.quote_literal(p_status), 'NULL') USING ERRCODE = 'PR110';
  END IF;
  WITH u AS (
    UPDATE pgrelay_notifier.notifications n
       SET status = p_status,
           attempts = n.attempts + CASE WHEN p_status = 'sending' THEN 1 ELSE 0 END,
           last_error = CASE WHEN p_status = 'failed' THEN v_error ELSE n.last_error END,
           sent_at = CASE WHEN p_status = 'sent' THEN pg_catalog.clock_timestamp() ELSE n.sent_at END,
           updated_at = pg_catalog.clock_timestamp()
     WHERE n.notification_id = ANY (p_notification_ids)
       AND n.status = ANY (CASE p_status WHEN 'sending' THEN ARRAY['queued']
                                         WHEN 'sent' THEN ARRAY['queued', 'sending']
                                         WHEN 'failed' THEN ARRAY['queued', 'sending']
                                         ELSE ARRAY[]::text[] END)
    RETURNING n.notification_id, n.channel
  )
  SELECT COALESCE(pg_catalog.array_agg(u.notification_id ORDER BY u.notification_id), '{}'),
         COALESCE(pg_catalog.array_agg(u.channel ORDER BY u.notification_id), '{}')
    INTO v_ids, v_channels
    FROM u;
  IF pg_catalog.cardinality(v_ids) > 0 THEN
    PERFORM pgrelay_notifier._event(v_ids, v_channels, p_status, CASE WHEN p_status = 'failed' THEN v_error END);
  END IF;
  IF p_status = 'sending' THEN
    UPDATE pgrelay_notifier.notifications n
       SET attempts = n.attempts + 1, updated_at = pg_catalog.clock_timestamp()
     WHERE n.notification_id = ANY (p_notification_ids) AND n.status = 'sending'
       AND NOT n.notification_id = ANY (v_ids);
  END IF;
  RETURN v_ids;
END
$$;

ALTER FUNCTION pgrelay_notifier.set_status_many(bigint[], text, text) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.set_status_many(bigint[], text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier.set_status_many(p_notification_ids bigint[], p_status text, p_error text) TO pgrelay_processor;
