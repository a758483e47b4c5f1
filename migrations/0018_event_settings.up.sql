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

-- The cluster name a database starts with: its name, made URI-safe.
CREATE FUNCTION pgrelay._default_cluster_name() RETURNS text
LANGUAGE sql STABLE
RETURN COALESCE(NULLIF(pg_catalog.left(pg_catalog.regexp_replace(
         pg_catalog.regexp_replace(pg_catalog.current_database()::pg_catalog.text, '[^A-Za-z0-9._-]', '-', 'g'),
         '^[^A-Za-z0-9]+', ''), 63), ''), 'pgrelay');

-- The row exists only once set: no row means the defaults (schema 2, the
-- database's name), so that a node migrated before it joins a cluster
-- holds no row of this replicated table that the initial copy from
-- another node would collide with. Read through pgrelay._event_settings().
CREATE TABLE pgrelay.settings (
  singleton    boolean PRIMARY KEY DEFAULT true CONSTRAINT settings_one_row CHECK (singleton),
  event_schema int NOT NULL DEFAULT 2 CONSTRAINT settings_event_schema CHECK (event_schema IN (1, 2)),
  cluster_name text NOT NULL DEFAULT pgrelay._default_cluster_name() CONSTRAINT settings_cluster_name
                 CHECK (cluster_name OPERATOR(pg_catalog.~) '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
  updated_at   timestamptz NOT NULL DEFAULT pg_catalog.now()
);

COMMENT ON TABLE pgrelay.settings IS
  'At most one row: the document schema (1 or 2) and the cluster name of the status events on NATS; none: schema 2 and the database''s name (docs/events.md).';

-- An installation that has published keeps schema 1.
INSERT INTO pgrelay.settings (event_schema)
SELECT 1 WHERE EXISTS (SELECT FROM pgrelay.publish_cursors)
ON CONFLICT (singleton) DO NOTHING;

-- The settings in force: the row, or the defaults.
CREATE FUNCTION pgrelay._event_settings(OUT event_schema int, OUT cluster_name text)
LANGUAGE sql STABLE
BEGIN ATOMIC
  SELECT COALESCE(s.event_schema, 2), COALESCE(s.cluster_name, pgrelay._default_cluster_name())
    FROM (SELECT) AS one LEFT JOIN pgrelay.settings AS s ON true;
END;

REVOKE ALL ON FUNCTION pgrelay._default_cluster_name(), pgrelay._event_settings() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._default_cluster_name(), pgrelay._event_settings()
  TO pgrelay_processor, pgrelay_viewer, pgrelay_admin;

GRANT SELECT ON pgrelay.settings TO pgrelay_processor, pgrelay_viewer;
GRANT SELECT, INSERT (event_schema, cluster_name), UPDATE (event_schema, cluster_name, updated_at) ON pgrelay.settings TO pgrelay_admin;
