-- requeue: notification p_notification_id of channel p_channel goes from
-- 'failed' back to 'queued', for the retry of its dead event: the one move
-- back the notifier allows, made only here and only by pgrelay.retry()
-- (through its owner; no role is granted it). The gate is reset
-- (sending_event, send_in_doubt): the retried event may send it, even where
-- an earlier attempt may have handed it to the SMTP server (an admin's
-- retry asks for exactly that). The change is appended to status_events and
-- p_reason to debug_log, as every other transition. A notification that is
-- not 'failed' (queued, sending, sent, cancelled) or of another channel is
-- left as it is: the retried event's gate decides for it as for any event.
-- Returns whether the status changed. SECURITY INVOKER: its only caller,
-- pgrelay.retry(), runs as the schema's owner, who owns the notifier's
-- tables.

CREATE OR REPLACE FUNCTION pgrelay_notifier.requeue(p_notification_id bigint, p_channel text, p_reason text) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  UPDATE pgrelay_notifier.notifications n
     SET status = 'queued', sending_event = NULL, send_in_doubt = false,
         updated_at = pg_catalog.clock_timestamp()
   WHERE n.notification_id = p_notification_id AND n.channel = p_channel AND n.status = 'failed';
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pgrelay_notifier._event(ARRAY[p_notification_id], ARRAY[p_channel], 'queued', NULL);
  PERFORM pgrelay_notifier.debug_log(p_notification_id, p_reason);
  RETURN true;
END
$$;

ALTER FUNCTION pgrelay_notifier.requeue(bigint, text, text) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.requeue(bigint, text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
