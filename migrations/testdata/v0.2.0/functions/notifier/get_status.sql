-- get_status: queued, sending, sent, failed or cancelled, for a notification
-- the caller may see (_may_see); NULL for any other id, as for an unknown one.

CREATE OR REPLACE FUNCTION pgrelay_notifier.get_status(p_notification_id bigint) RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT n.status FROM pgrelay_notifier.notifications n
   WHERE n.notification_id = p_notification_id AND pgrelay_notifier._may_see(n.sent_by)
$$;

ALTER FUNCTION pgrelay_notifier.get_status(bigint) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.get_status(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier.get_status(p_notification_id bigint) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay_notifier.get_status(p_notification_id bigint) TO pgrelay_admin;
