-- The event of a notification pgrelay_notifier.cancel() cancelled: its
-- rows are found by channel and payload (the notification's id), the
-- pending ones through queue_ready, the running ones through
-- queue_inflight, so a channel's backlog bounds the search.

CREATE OR REPLACE FUNCTION pgrelay._cancel_email_event(p_notification_id bigint, p_channel text, p_by text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_origin bigint;
BEGIN
  FOR v_origin IN
    SELECT DISTINCT q.origin_id FROM pgrelay.queue q
     WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.payload = p_notification_id::text
    UNION
    SELECT q.origin_id FROM pgrelay.queue q
     WHERE q.dispatched_at IS NOT NULL AND q.dispatched_by IS NOT NULL
       AND q.channel = p_channel AND q.payload = p_notification_id::text
  LOOP
    PERFORM pgrelay._cancel_request(v_origin, p_by);
  END LOOP;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._cancel_email_event(bigint, text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._cancel_email_event(p_notification_id bigint, p_channel text, p_by text) TO pgrelay_notifier;
