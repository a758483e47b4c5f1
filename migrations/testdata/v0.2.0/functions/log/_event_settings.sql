-- The settings in force: the row, or the defaults.

CREATE OR REPLACE FUNCTION pgrelay._event_settings(OUT event_schema int, OUT cluster_name text)
LANGUAGE sql STABLE
BEGIN ATOMIC
  SELECT COALESCE(s.event_schema, 2), COALESCE(s.cluster_name, pgrelay._default_cluster_name())
    FROM (SELECT) AS one LEFT JOIN pgrelay.settings AS s ON true;
END;

REVOKE ALL ON FUNCTION pgrelay._event_settings() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._event_settings(OUT event_schema integer, OUT cluster_name text) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._event_settings(OUT event_schema integer, OUT cluster_name text) TO pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay._event_settings(OUT event_schema integer, OUT cluster_name text) TO pgrelay_admin;
