-- _this_node: this node's id for the caller: the recorded one
-- (pgrelay.this_node), except that a session of a login in
-- pgrelay_processor or pgrelay_admin (superusers included) keeps its own
-- pg_relay.node_id, so a Processor's --node-id and an admin's session stay
-- theirs. A session whose setting equals the recorded id (the common case:
-- the database's setting) costs one read of a one-row table.

CREATE OR REPLACE FUNCTION pgrelay._this_node() RETURNS integer
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  s text := pg_catalog.current_setting('pg_relay.node_id', true);
  v_node int;
BEGIN
  SELECT t.node_id INTO v_node FROM pgrelay.this_node t;
  IF v_node IS NULL THEN
    RETURN pgrelay._node_setting();
  END IF;
  IF s = v_node::text OR (v_node = 0 AND pg_catalog.btrim(COALESCE(s, '')) = '') THEN
    RETURN v_node;
  END IF;
  IF pg_catalog.pg_has_role(session_user, 'pgrelay_processor', 'MEMBER')
     OR pg_catalog.pg_has_role(session_user, 'pgrelay_admin', 'MEMBER') THEN
    RETURN pgrelay._node_setting();
  END IF;
  RETURN v_node;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._this_node() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._this_node() TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay._this_node() TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay._this_node() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._this_node() TO pgrelay_notifier;
