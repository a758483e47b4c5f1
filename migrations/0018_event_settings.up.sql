-- Settings of the status events every Processor publishes the same way, so
-- they live in the database (one row, replicated to every node) rather than
-- in a run flag: the publisher's lease moves between Processors, and what
-- subscribers read must not change with it (docs/events.md).
--
--   event_schema  the version of the documents: 1 writes ids as JSON
--                 numbers, 2 as strings. An installation that has published
--                 before (a publish cursor exists) keeps 1 until an admin
--                 moves it; a new one starts at 2. Read each publishing
--                 round.
--   cluster_name  names the installation in each message's CloudEvents
--                 source (pgrelay://<cluster_name>/node/<node>); bounded and
--                 URI-safe (events.ClusterNameMax, events.ValidClusterName).
--                 It starts as the database's name.

CREATE TABLE pgrelay.settings (
  singleton    boolean PRIMARY KEY DEFAULT true CONSTRAINT settings_one_row CHECK (singleton),
  event_schema int NOT NULL DEFAULT 2 CONSTRAINT settings_event_schema CHECK (event_schema IN (1, 2)),
  cluster_name text NOT NULL CONSTRAINT settings_cluster_name
                 CHECK (cluster_name OPERATOR(pg_catalog.~) '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
  updated_at   timestamptz NOT NULL DEFAULT pg_catalog.now()
);

COMMENT ON TABLE pgrelay.settings IS
  'One row: the document schema (1 or 2) and the cluster name of the status events on NATS (docs/events.md).';

INSERT INTO pgrelay.settings (event_schema, cluster_name)
SELECT CASE WHEN EXISTS (SELECT FROM pgrelay.publish_cursors) THEN 1 ELSE 2 END,
       COALESCE(NULLIF(pg_catalog.left(pg_catalog.regexp_replace(
                  pg_catalog.regexp_replace(pg_catalog.current_database()::pg_catalog.text, '[^A-Za-z0-9._-]', '-', 'g'),
                  '^[^A-Za-z0-9]+', ''), 63), ''), 'pgrelay')
ON CONFLICT (singleton) DO NOTHING;

GRANT SELECT ON pgrelay.settings TO pgrelay_processor, pgrelay_viewer;
GRANT SELECT, UPDATE (event_schema, cluster_name, updated_at) ON pgrelay.settings TO pgrelay_admin;
