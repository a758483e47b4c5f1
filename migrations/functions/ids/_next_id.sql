-- _next_id: a new id of this node: _next_id_at at the clock's current
-- millisecond since 2026-01-01 00:00 UTC (1767225600000 ms after the Unix
-- epoch). LANGUAGE sql without a SET clause, so that it inlines into the
-- statements that call it (notify()'s among them): PostgreSQL does not
-- inline a function with a SET clause.

CREATE OR REPLACE FUNCTION pgrelay._next_id() RETURNS bigint
LANGUAGE sql VOLATILE
RETURN pgrelay._next_id_at(
  (pg_catalog.floor(EXTRACT(epoch FROM pg_catalog.clock_timestamp()) * 1000))::bigint - 1767225600000);

REVOKE ALL ON FUNCTION pgrelay._next_id() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._next_id() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._next_id() TO pgrelay_notifier;
