-- _event: appends one status change per notification to status_events, in
-- the order given (notification p_notification_ids[i] of channel
-- p_channels[i]).

CREATE OR REPLACE FUNCTION pgrelay_notifier._event(p_notification_ids bigint[], p_channels text[], p_status text, p_error text) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  INSERT INTO pgrelay_notifier.status_events (notification_id, channel, status, error)
  SELECT e.id, e.channel, p_status, p_error
    FROM unnest(p_notification_ids, p_channels) WITH ORDINALITY AS e(id, channel, ord)
   ORDER BY e.ord
$$;

ALTER FUNCTION pgrelay_notifier._event(bigint[], text[], text, text) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier._event(bigint[], text[], text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
