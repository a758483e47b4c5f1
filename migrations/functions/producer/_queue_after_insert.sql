-- Direct inserts: rows that start an event (retry_of NULL) of channels with
-- the setting, in the statement's id order, with the row's priority (NULL
-- for 0), and the trace context of a producer that set one
-- (_store_traces, once per channel) with the rows that are first attempts.
-- Retry rows carry retry_of.

CREATE OR REPLACE FUNCTION pgrelay._queue_after_insert() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_first text;
  v_last text;
  v_channel text;
BEGIN
  INSERT INTO pgrelay.event_payloads (queue_id, payload)
  SELECT n.id, n.payload
    FROM new_rows n
    JOIN pgrelay.channels c ON c.channel = n.channel
   WHERE c.publish_payload
  ON CONFLICT (queue_id) DO NOTHING;
  INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, priority)
  SELECT n.id, n.origin_id, n.channel, n.attempt, 'enqueued', NULLIF(n.priority, 0)
    FROM new_rows n
    JOIN pgrelay.channels c ON c.channel = n.channel
   WHERE c.publish_enqueued AND n.retry_of IS NULL
   ORDER BY n.id;
  IF pg_catalog.current_setting('pgrelay.traceparent', true) <> '' THEN
    PERFORM pgrelay._store_traces(n.channel, pg_catalog.array_agg(n.id))
       FROM new_rows n WHERE n.id = n.origin_id GROUP BY n.channel;
  END IF;
  SELECT min(n.channel), max(n.channel) INTO v_first, v_last FROM new_rows n;
  IF v_first IS NULL THEN
    RETURN NULL;
  END IF;
  IF v_first = v_last THEN
    PERFORM pgrelay._wake(v_first);
  ELSE
    FOR v_channel IN SELECT DISTINCT n.channel FROM new_rows n LOOP
      PERFORM pgrelay._wake(v_channel);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._queue_after_insert() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._queue_after_insert() TO pgrelay_processor;

CREATE OR REPLACE TRIGGER queue_after_insert AFTER INSERT ON pgrelay.queue REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT WHEN ((current_setting('pgrelay.stamped'::text, true) IS DISTINCT FROM 'on'::text)) EXECUTE FUNCTION pgrelay._queue_after_insert();
