-- _pending_channels: the channels that have rows not in flight, due or not:
-- a loose index scan of queue_ready, one probe per such channel and one
-- more, however many rows each holds. The claims visit these channels, not
-- every channel registered: a claim over 10 000 channels with one event
-- pending ran a statement for each channel. PL/pgSQL, whose plan the
-- session keeps (an SQL function with a query in it is planned at every
-- call).

CREATE OR REPLACE FUNCTION pgrelay._pending_channels() RETURNS text[]
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN ARRAY(
    WITH RECURSIVE pc(channel) AS (
      (SELECT q.channel FROM pgrelay.queue q
        WHERE q.dispatched_at IS NULL
        ORDER BY q.channel LIMIT 1)
      UNION ALL
      SELECT (SELECT q.channel FROM pgrelay.queue q
               WHERE q.dispatched_at IS NULL AND q.channel > pc.channel
               ORDER BY q.channel LIMIT 1)
        FROM pc WHERE pc.channel IS NOT NULL)
    SELECT pc.channel FROM pc WHERE pc.channel IS NOT NULL);
END
$$;

REVOKE ALL ON FUNCTION pgrelay._pending_channels() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._pending_channels() TO pgrelay_processor;
