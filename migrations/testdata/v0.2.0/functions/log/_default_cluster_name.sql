-- The cluster name a database starts with: its name, made URI-safe.

CREATE OR REPLACE FUNCTION pgrelay._default_cluster_name() RETURNS text
LANGUAGE sql STABLE
RETURN COALESCE(NULLIF(pg_catalog.left(pg_catalog.regexp_replace(
         pg_catalog.regexp_replace(pg_catalog.current_database()::pg_catalog.text, '[^A-Za-z0-9._-]', '-', 'g'),
         '^[^A-Za-z0-9]+', ''), 63), ''), 'pgrelay');

REVOKE ALL ON FUNCTION pgrelay._default_cluster_name() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._default_cluster_name() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._default_cluster_name() TO pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay._default_cluster_name() TO pgrelay_admin;
