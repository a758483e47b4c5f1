CREATE OR REPLACE FUNCTION pgrelay._next_id() RETURNS bigint
LANGUAGE sql VOLATILE
RETURN pgrelay._next_id_at(
  (pg_catalog.floor(EXTRACT(epoch FROM pg_catalog.clock_timestamp()) * 1000))::bigint - 1767225600000);

REVOKE ALL ON FUNCTION pgrelay._next_id() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._next_id() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._next_id() TO pgrelay_notifier;
