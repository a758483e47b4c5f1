-- fail_for_event: set_status(p_notification_id, 'failed', p_error) for queue
-- event p_event of channel p_channel, only where that event could still
-- send the notification: it is queued and of p_channel, or sending held by
-- p_event (or by no event). An event that lost the gate, or of another
-- channel, never fails a notification another event is sending or sent.
-- Returns whether the status changed.

CREATE OR REPLACE FUNCTION pgrelay_notifier.fail_for_event(p_notification_id bigint, p_channel text, p_event bigint, p_error text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM FROM pgrelay_notifier.notifications n
    WHERE n.notification_id = p_notification_id AND n.channel = p_channel
      AND (n.status = 'queued'
           OR (n.status = 'sending' AND (n.sending_event = p_event OR n.sending_event IS NULL)))
      FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  RETURN pgrelay_notifier.set_status(p_notification_id, 'failed', p_error);
END
$$;

ALTER FUNCTION pgrelay_notifier.fail_for_event(bigint, text, bigint, text) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.fail_for_event(bigint, text, bigint, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier.fail_for_event(p_notification_id bigint, p_channel text, p_event bigint, p_error text) TO pgrelay_processor;
