CREATE OR REPLACE FUNCTION pgrelay._id_node(p_id bigint) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ((p_id >> 12) & 1023)::int;

REVOKE ALL ON FUNCTION pgrelay._id_node(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
