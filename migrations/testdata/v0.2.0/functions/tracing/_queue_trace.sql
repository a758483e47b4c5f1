-- _queue_trace stores the traceparent of pgrelay.traceparent with a new
-- event (a first attempt: id = origin_id). A SQL producer sets it for its
-- transaction (SET LOCAL pgrelay.traceparent = '00-…'): every event it
-- enqueues after that carries it. A value _traced set holds for its own
-- statement only. A value that is not a traceparent of version 00 stores
-- nothing: tracing never refuses an event. SECURITY DEFINER: producers
-- cannot write the table themselves.

CREATE OR REPLACE FUNCTION pgrelay._queue_trace() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  v text := pg_catalog.current_setting('pgrelay.traceparent', true);
BEGIN
  IF pg_catalog.length(v) > 55 THEN
    IF pg_catalog.substr(v, 56) IS DISTINCT FROM '@' || pg_catalog.statement_timestamp()::pg_catalog.text THEN
      RETURN NULL; -- set by an earlier statement's _traced
    END IF;
    v := pg_catalog.left(v, 55);
  END IF;
  IF v ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
     AND pg_catalog.substr(v, 4, 32) <> pg_catalog.repeat('0', 32)
     AND pg_catalog.substr(v, 37, 16) <> pg_catalog.repeat('0', 16) THEN
    INSERT INTO pgrelay.event_traces (origin_id, traceparent) VALUES (NEW.origin_id, v)
    ON CONFLICT (origin_id) DO NOTHING;
  END IF;
  RETURN NULL;
END
$_$;

REVOKE ALL ON FUNCTION pgrelay._queue_trace() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;

-- An untraced enqueue pays the WHEN clause only: a setting that is not set
-- (NULL) or empty skips the function. Retries (id <> origin_id) find the
-- first attempt's row.

CREATE OR REPLACE TRIGGER queue_trace AFTER INSERT ON pgrelay.queue FOR EACH ROW WHEN (((new.id = new.origin_id) AND (current_setting('pgrelay.traceparent'::text, true) <> ''::text))) EXECUTE FUNCTION pgrelay._queue_trace();
