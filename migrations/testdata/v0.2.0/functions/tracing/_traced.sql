-- _traced: the channel argument of a traced notify() or notify_many() call
-- (Go's Notify): it sets pgrelay.traceparent before the enqueue runs (a
-- function's arguments are evaluated before it) and returns p_channel. The
-- value is marked with the statement's start, so that it holds for this
-- statement's enqueue only: an untraced Notify later in the same
-- transaction stores nothing.

CREATE OR REPLACE FUNCTION pgrelay._traced(p_channel text, p_traceparent text) RETURNS text
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT pg_catalog.set_config('pgrelay.traceparent',
           COALESCE(p_traceparent, '') || '@' || pg_catalog.statement_timestamp()::pg_catalog.text, true);
  SELECT p_channel
$$;

REVOKE ALL ON FUNCTION pgrelay._traced(text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._traced(p_channel text, p_traceparent text) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay._traced(p_channel text, p_traceparent text) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay._traced(p_channel text, p_traceparent text) TO pgrelay_notifier;
