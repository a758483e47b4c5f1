-- _id_node: the node an id was drawn on, its 10 node bits (layout in
-- _next_id_at): _enqueue stamps the rows of a batch with the node of their
-- first id, and the stamping trigger (_queue_before_insert) tells a row
-- enqueued here from one replicated from another node. Inlined like
-- _may_take (LANGUAGE sql, no SET clause, SQL standard body).

CREATE OR REPLACE FUNCTION pgrelay._id_node(p_id bigint) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ((p_id >> 12) & 1023)::int;

REVOKE ALL ON FUNCTION pgrelay._id_node(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
