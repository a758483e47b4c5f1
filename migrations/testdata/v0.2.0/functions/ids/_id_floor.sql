-- _id_floor: the smallest id a timestamp can carry on any node; used to turn
-- "older than" into a primary-key range.

CREATE OR REPLACE FUNCTION pgrelay._id_floor(p_at timestamp with time zone) RETURNS bigint
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT GREATEST(0,
    (pg_catalog.floor(EXTRACT(epoch FROM p_at) * 1000))::bigint - 1767225600000) << 22
$$;

REVOKE ALL ON FUNCTION pgrelay._id_floor(timestamp with time zone) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._id_floor(p_at timestamp with time zone) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._id_floor(p_at timestamp with time zone) TO pgrelay_viewer;
