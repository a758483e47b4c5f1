-- unhandled_go_channels: the go channels whose handler no running Processor
-- of this node has (none in pgrelay.processors recorded the name): their
-- events wait, pending, until one that has it starts. pending counts them
-- as queue_stats() does not: exactly, since such a backlog is what to look
-- at (read through queue_ready).

CREATE OR REPLACE FUNCTION pgrelay.unhandled_go_channels() RETURNS TABLE(channel text, handler text, pending bigint)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT c.channel, c.handler,
         (SELECT count(*) FROM pgrelay.queue q WHERE q.channel = c.channel AND q.dispatched_at IS NULL)
    FROM pgrelay.channels c
   WHERE c.kind = 'go'
     AND NOT EXISTS (SELECT FROM pgrelay.go_handlers g JOIN pgrelay.processors p
                              ON p.processor_id = g.processor_id
                      WHERE g.handler = c.handler)
   ORDER BY c.channel
$$;

REVOKE ALL ON FUNCTION pgrelay.unhandled_go_channels() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.unhandled_go_channels() TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay.unhandled_go_channels() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay.unhandled_go_channels() TO pgrelay_viewer;
