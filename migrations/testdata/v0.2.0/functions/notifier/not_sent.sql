-- not_sent: the attempt of event p_event certainly handed nothing to the SMTP
-- server; a later attempt may send. True when it cleared the mark.

CREATE OR REPLACE FUNCTION pgrelay_notifier.not_sent(p_notification_id bigint, p_event bigint) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  WITH c AS (
    UPDATE pgrelay_notifier.notifications n SET send_in_doubt = false
     WHERE n.notification_id = p_notification_id AND n.status = 'sending'
       AND n.sending_event = p_event AND n.send_in_doubt
    RETURNING 1
  )
  SELECT EXISTS (SELECT FROM c);
$$;

ALTER FUNCTION pgrelay_notifier.not_sent(bigint, bigint) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.not_sent(bigint, bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier.not_sent(p_notification_id bigint, p_event bigint) TO pgrelay_processor;
