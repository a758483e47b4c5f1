-- Trace context (issue 31): the W3C traceparent of the producer's span,
-- stored with an event when its producer traces, so that a Processor's span
-- of every attempt (the first and each retry) links to it. An event's row
-- exists only when its producer gave one: an untraced enqueue writes
-- nothing here. Keyed by the event's origin id, which every retry keeps.
-- A traceparent of version 00 is 55 characters: bounded by the CHECK.
CREATE TABLE pgrelay.event_traces (
  origin_id bigint PRIMARY KEY,
  traceparent text NOT NULL
    CONSTRAINT event_traces_traceparent CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$')
);

GRANT SELECT ON pgrelay.event_traces TO pgrelay_processor, pgrelay_admin, pgrelay_viewer;

-- _traced: the channel argument of a traced notify() or notify_many() call
-- (Go's Notify): it sets pgrelay.traceparent before the enqueue runs (a
-- function's arguments are evaluated before it) and returns p_channel. The
-- value is marked with the statement's start, so that it holds for this
-- statement's enqueue only: an untraced Notify later in the same
-- transaction stores nothing.
CREATE FUNCTION pgrelay._traced(p_channel text, p_traceparent text) RETURNS text
  LANGUAGE sql VOLATILE
  SET search_path = pg_catalog, pg_temp
AS $$
  SELECT pg_catalog.set_config('pgrelay.traceparent',
           COALESCE(p_traceparent, '') || '@' || pg_catalog.statement_timestamp()::pg_catalog.text, true);
  SELECT p_channel
$$;

REVOKE ALL ON FUNCTION pgrelay._traced(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._traced(text, text) TO pgrelay_producer, pgrelay_admin, pgrelay_notifier;

-- _queue_trace stores the traceparent of pgrelay.traceparent with a new
-- event (a first attempt: id = origin_id). A SQL producer sets it for its
-- transaction (SET LOCAL pgrelay.traceparent = '00-…'): every event it
-- enqueues after that carries it. A value _traced set holds for its own
-- statement only. A value that is not a traceparent of version 00 stores
-- nothing: tracing never refuses an event. SECURITY DEFINER: producers
-- cannot write the table themselves.
CREATE FUNCTION pgrelay._queue_trace() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

REVOKE ALL ON FUNCTION pgrelay._queue_trace() FROM PUBLIC;

-- An untraced enqueue pays the WHEN clause only: a setting that is not set
-- (NULL) or empty skips the function. Retries (id <> origin_id) find the
-- first attempt's row.
CREATE TRIGGER queue_trace AFTER INSERT ON pgrelay.queue
  FOR EACH ROW
  WHEN (NEW.id = NEW.origin_id AND pg_catalog.current_setting('pgrelay.traceparent', true) <> '')
  EXECUTE FUNCTION pgrelay._queue_trace();

-- _trim_event_traces deletes up to p_batch traces older than p_older_than
-- (by their origin id's time) whose event has no queue row left (the
-- Processor's janitor, with the log's retention).
CREATE FUNCTION pgrelay._trim_event_traces(p_older_than interval, p_batch int) RETURNS int
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n int;
BEGIN
  DELETE FROM pgrelay.event_traces t
   WHERE t.origin_id IN (SELECT x.origin_id FROM pgrelay.event_traces x
                          WHERE x.origin_id < pgrelay._id_floor(now() - p_older_than)
                            AND NOT EXISTS (SELECT FROM pgrelay.queue q WHERE q.id = x.origin_id)
                            AND NOT EXISTS (SELECT FROM pgrelay.queue q
                                             WHERE q.origin_id = x.origin_id AND q.retry_of IS NOT NULL)
                          ORDER BY x.origin_id LIMIT p_batch);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._trim_event_traces(interval, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._trim_event_traces(interval, int) TO pgrelay_processor;
