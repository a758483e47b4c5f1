-- _pin_of: a row's run_in_node: the node it is enqueued on, for a
-- node_restricted channel; else none (NULL). Inlined like _lane_of.

CREATE OR REPLACE FUNCTION pgrelay._pin_of(p_node_restricted bool, p_node int) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_node_restricted THEN p_node END;

REVOKE ALL ON FUNCTION pgrelay._pin_of(boolean, integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
