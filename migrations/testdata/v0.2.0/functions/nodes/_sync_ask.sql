-- _sync_ask: this node asks every other node to answer; returns the term to
-- wait for.

CREATE OR REPLACE FUNCTION pgrelay._sync_ask() RETURNS bigint
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  INSERT INTO pgrelay.sync_asks AS a (node_id, term) VALUES (pgrelay._this_node(), 1)
  ON CONFLICT (node_id) DO UPDATE SET term = a.term + 1, asked_at = now()
  RETURNING a.term
$$;

REVOKE ALL ON FUNCTION pgrelay._sync_ask() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._sync_ask() TO pgrelay_processor;
