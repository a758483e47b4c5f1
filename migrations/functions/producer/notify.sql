-- notify: enqueues one event of p_channel in the caller's transaction and
-- returns its id. It checks the channel and the caller's right to it
-- (_check_notify) and the payload; the event is due at p_not_before or after
-- p_delay (_due), else at once, with p_priority instead of the channel's.
-- With a unique key (p_key, else the payload, for p_unique_for) the insert
-- is _enqueue_unique's, on a deduplicating channel _enqueue_dedup's: both
-- may return an open event's id instead of a new one. Otherwise one id
-- (_next_id) and _enqueue. SECURITY DEFINER: producers write pgrelay's
-- tables only through it and notify_many().

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
