-- notify() and notify_many() gain p_priority, p_key and p_unique_for, last.
-- Each is created beside the old one, takes its owner and grants, and the
-- old one is dropped (as in 0019).

CREATE OR REPLACE FUNCTION pgrelay.notify(p_channel text, p_payload text, p_not_before timestamp with time zone DEFAULT NULL::timestamp with time zone, p_delay interval DEFAULT NULL::interval, p_priority integer DEFAULT NULL::integer, p_key text DEFAULT NULL::text, p_unique_for interval DEFAULT NULL::interval) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  v_id bigint;
  v_due timestamptz;
BEGIN
  IF NOT pgrelay._payload_ok(p_payload) THEN
    PERFORM pgrelay._check_payload(p_channel, p_payload);
  END IF;
  IF p_not_before IS NOT NULL OR p_delay IS NOT NULL THEN
    v_due := pgrelay._due(p_not_before, p_delay);
  END IF;
  IF p_priority IS NOT NULL THEN
    ch.priority := pgrelay._priority_of(p_priority);
  END IF;
  IF p_key IS NOT NULL OR p_unique_for IS NOT NULL THEN
    RETURN pgrelay._enqueue_unique(ch, COALESCE(p_key, p_payload), p_payload, v_due,
                                   pgrelay._unique_for(p_unique_for));
  END IF;
  IF ch.deduplicate THEN
    RETURN pgrelay._enqueue_dedup(ch, p_payload, v_due);
  END IF;
  v_id := pgrelay._next_id();
  PERFORM pgrelay._enqueue(ch, ARRAY[v_id], ARRAY[p_payload], v_due);
  RETURN v_id;
END
$$;

REVOKE ALL ON FUNCTION pgrelay.notify(text, text, timestamp with time zone, interval, integer, text, interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.notify(p_channel text, p_payload text, p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text, p_unique_for interval) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay.notify(p_channel text, p_payload text, p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text, p_unique_for interval) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay.notify(p_channel text, p_payload text, p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text, p_unique_for interval) TO pgrelay_notifier;
