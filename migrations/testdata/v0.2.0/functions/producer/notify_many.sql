-- notify_many's p_key holds one key per payload (a NULL element: that
-- payload is its key); arrays of different lengths raise PR111.

CREATE OR REPLACE FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[], p_not_before timestamp with time zone DEFAULT NULL::timestamp with time zone, p_delay interval DEFAULT NULL::interval, p_priority integer DEFAULT NULL::integer, p_key text[] DEFAULT NULL::text[], p_unique_for interval DEFAULT NULL::interval) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  p text;
  v_ids bigint[];
  v_due timestamptz;
  v_for interval;
  r record;
BEGIN
  IF p_payloads IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify_many: payloads must not be NULL' USING ERRCODE = 'PR005';
  END IF;
  IF EXISTS (SELECT FROM pg_catalog.unnest(p_payloads) AS u(p) WHERE NOT pgrelay._payload_ok(u.p)) THEN
    FOREACH p IN ARRAY p_payloads LOOP
      PERFORM pgrelay._check_payload(p_channel, p);
    END LOOP;
  END IF;
  IF p_not_before IS NOT NULL OR p_delay IS NOT NULL THEN
    v_due := pgrelay._due(p_not_before, p_delay);
  END IF;
  IF p_priority IS NOT NULL THEN
    ch.priority := pgrelay._priority_of(p_priority);
  END IF;
  IF p_key IS NOT NULL OR p_unique_for IS NOT NULL THEN
    IF pg_catalog.cardinality(p_key) <> pg_catalog.cardinality(p_payloads) THEN
      RAISE EXCEPTION 'pgrelay.notify_many: % keys for % payloads', pg_catalog.cardinality(p_key),
        pg_catalog.cardinality(p_payloads) USING ERRCODE = 'PR111',
        HINT = 'Give one key per payload (NULL: the payload is its key).';
    END IF;
    v_for := pgrelay._unique_for(p_unique_for);
    FOR r IN
      SELECT u.payload, u.key
        FROM ROWS FROM (pg_catalog.unnest(p_payloads), pg_catalog.unnest(p_key)) WITH ORDINALITY AS u(payload, key, n)
       ORDER BY u.n
    LOOP
      RETURN NEXT pgrelay._enqueue_unique(ch, COALESCE(r.key, r.payload), r.payload, v_due, v_for);
    END LOOP;
    RETURN;
  END IF;
  IF ch.deduplicate THEN
    FOREACH p IN ARRAY p_payloads LOOP
      RETURN NEXT pgrelay._enqueue_dedup(ch, p, v_due);
    END LOOP;
    RETURN;
  END IF;
  IF pg_catalog.cardinality(p_payloads) = 0 THEN
    RETURN;
  END IF;
  v_ids := pgrelay._next_ids(pg_catalog.cardinality(p_payloads));
  PERFORM pgrelay._enqueue(ch, v_ids, p_payloads, v_due);
  RETURN QUERY SELECT u.id FROM pg_catalog.unnest(v_ids) AS u(id);
END
$$;

REVOKE ALL ON FUNCTION pgrelay.notify_many(text, text[], timestamp with time zone, interval, integer, text[], interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[], p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text[], p_unique_for interval) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[], p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text[], p_unique_for interval) TO pgrelay_admin;
