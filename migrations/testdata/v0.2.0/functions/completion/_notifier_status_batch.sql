-- _notifier_status_batch: the notifier source's scan (the log's is a plain
-- query on pgrelay.log). The notifier's schema is created after this one:
-- PL/pgSQL resolves the table when called, and the publisher calls this only
-- when to_regclass('pgrelay_notifier.status_events') is not NULL. SECURITY DEFINER
-- so the Processor role needs no grant on the notifier's table.

CREATE OR REPLACE FUNCTION pgrelay._notifier_status_batch(p_node integer, p_after bigint, p_before bigint, p_limit integer) RETURNS TABLE(id bigint, notification_id bigint, channel text, status text, error text, node integer, at timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN QUERY
  SELECT s.id, s.notification_id, s.channel, s.status, s.error, s.node, s.at
    FROM pgrelay_notifier.status_events s
   WHERE s.node = p_node AND s.id > p_after AND s.id < p_before
   ORDER BY s.id
   LIMIT p_limit;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._notifier_status_batch(integer, bigint, bigint, integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._notifier_status_batch(p_node integer, p_after bigint, p_before bigint, p_limit integer) TO pgrelay_processor;
