-- _store_traces stores the traceparent of pgrelay.traceparent with the new
-- events p_ids (first attempts) of p_channel, unless the channel refuses
-- trace contexts (channels.store_traces false). Its callers, _enqueue
-- (notify, notify_many) and the queue's statement trigger (a direct
-- insert, once per channel of its rows), call it only when the setting is
-- not empty: an untraced enqueue pays one current_setting() per statement,
-- never a trigger per row, and never reads the channel's setting. A SQL
-- producer sets the setting for its transaction (SET LOCAL
-- pgrelay.traceparent = '00-…'): every event it enqueues after that carries
-- it. A value _traced set holds for its own statement only. A value that is
-- not a traceparent of version 00 stores nothing: tracing never refuses an
-- event. SECURITY DEFINER: producers cannot write the table themselves.

CREATE OR REPLACE FUNCTION pgrelay._store_traces(p_channel text, p_ids bigint[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  v text := pg_catalog.current_setting('pgrelay.traceparent', true);
BEGIN
  IF pg_catalog.length(v) > 55 THEN
    IF pg_catalog.substr(v, 56) IS DISTINCT FROM '@' || pg_catalog.statement_timestamp()::pg_catalog.text THEN
      RETURN; -- set by an earlier statement's _traced
    END IF;
    v := pg_catalog.left(v, 55);
  END IF;
  IF v ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
     AND pg_catalog.substr(v, 4, 32) <> pg_catalog.repeat('0', 32)
     AND pg_catalog.substr(v, 37, 16) <> pg_catalog.repeat('0', 16)
     AND EXISTS (SELECT FROM pgrelay.channels c WHERE c.channel = p_channel AND c.store_traces) THEN
    INSERT INTO pgrelay.event_traces (origin_id, traceparent)
    SELECT u.id, v FROM pg_catalog.unnest(p_ids) AS u(id)
    ON CONFLICT (origin_id) DO NOTHING;
  END IF;
END
$_$;

REVOKE ALL ON FUNCTION pgrelay._store_traces(text, bigint[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._store_traces(p_channel text, p_ids bigint[]) TO pgrelay_processor;
