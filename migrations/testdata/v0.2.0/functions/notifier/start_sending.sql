-- start_sending: start_sending_many() for one event: the gate's verdict on
-- notification p_notification_id for queue event p_event of channel
-- p_channel, with the message when it is 'send'.

CREATE OR REPLACE FUNCTION pgrelay_notifier.start_sending(p_notification_id bigint, p_channel text, p_event bigint) RETURNS TABLE(verdict text, reason text, notification_id bigint, channel text, from_addr text, to_addrs text[], cc_addrs text[], bcc_addrs text[], subject text, body_text text, body_html text, headers jsonb, status text, attempts integer, created_at timestamp with time zone)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT s.verdict, s.reason, s.notification_id, s.channel, s.from_addr, s.to_addrs, s.cc_addrs, s.bcc_addrs,
         s.subject, s.body_text, s.body_html, s.headers, s.status, s.attempts, s.created_at
    FROM pgrelay_notifier.start_sending_many(ARRAY[p_notification_id], ARRAY[p_channel], ARRAY[p_event]) s
$$;

ALTER FUNCTION pgrelay_notifier.start_sending(bigint, text, bigint) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.start_sending(bigint, text, bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier.start_sending(p_notification_id bigint, p_channel text, p_event bigint) TO pgrelay_processor;
