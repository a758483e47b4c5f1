-- fetch: the message to send; no row when there is nothing to send (the
-- notification was deleted, cancelled, or already sent or failed: a
-- redelivered queue event then sends nothing twice).

CREATE OR REPLACE FUNCTION pgrelay_notifier."fetch"(p_notification_id bigint) RETURNS TABLE(notification_id bigint, channel text, from_addr text, to_addrs text[], cc_addrs text[], bcc_addrs text[], subject text, body_text text, body_html text, headers jsonb, status text, attempts integer, created_at timestamp with time zone)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT n.notification_id, n.channel, n.from_addr, n.to_addrs, n.cc_addrs, n.bcc_addrs, n.subject,
         n.body_text, n.body_html, n.headers, n.status, n.attempts, n.created_at
    FROM pgrelay_notifier.notifications n
   WHERE n.notification_id = p_notification_id AND n.status IN ('queued', 'sending')
$$;

ALTER FUNCTION pgrelay_notifier.fetch(bigint) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.fetch(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier."fetch"(p_notification_id bigint) TO pgrelay_processor;
