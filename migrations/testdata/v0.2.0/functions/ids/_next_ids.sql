-- _next_ids: p_n ids of _next_id's kind in one call, for a batch of log rows:
-- the first from _next_id (which moves the counter up to the clock when it
-- lags), the others straight from the counter right after it, so they lag
-- the clock no more than the first. One call per batch, not one per row.

CREATE OR REPLACE FUNCTION pgrelay._next_ids(p_n integer) RETURNS bigint[]
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node bigint := pgrelay._this_node();
BEGIN
  IF p_n IS NULL OR p_n <= 0 THEN
    RETURN '{}';
  END IF;
  RETURN ARRAY[pgrelay._next_id()] || ARRAY(
    SELECT ((v >> 12) << 22) | (v_node << 12) | (v & 4095)
      FROM (SELECT pg_catalog.nextval('pgrelay._id_seq') AS v FROM pg_catalog.generate_series(2, p_n) g
             ORDER BY g) s);
END
$$;

REVOKE ALL ON FUNCTION pgrelay._next_ids(integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._next_ids(p_n integer) TO pgrelay_processor;
