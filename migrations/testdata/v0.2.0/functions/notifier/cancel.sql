-- pgrelay_notifier.cancel: cancels a notification that has not been sent,
-- and the event that carries it, so the two never disagree.

CREATE OR REPLACE FUNCTION pgrelay_notifier.cancel(p_notification_id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_channel text;
BEGIN
  UPDATE pgrelay_notifier.notifications n
     SET status = 'cancelled', updated_at = clock_timestamp()
   WHERE n.notification_id = p_notification_id AND n.status = 'queued'
     AND pgrelay_notifier._may_see(n.sent_by)
  RETURNING n.channel INTO v_channel;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pgrelay_notifier._event(ARRAY[p_notification_id], ARRAY[v_channel], 'cancelled', NULL);
  PERFORM pgrelay._cancel_email_event(p_notification_id, v_channel, pgrelay_notifier._caller());
  RETURN true;
END
$$;

ALTER FUNCTION pgrelay_notifier.cancel(bigint) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.cancel(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier.cancel(p_notification_id bigint) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay_notifier.cancel(p_notification_id bigint) TO pgrelay_admin;
