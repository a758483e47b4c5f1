-- _cancel_request: records that p_origin is to be cancelled, on behalf of
-- p_by, and applies it here if this node runs it (elsewhere that node's
-- sweep does, once the request has arrived: _cancel_sweep).

CREATE OR REPLACE FUNCTION pgrelay._cancel_request(p_origin bigint, p_by text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  INSERT INTO pgrelay.cancels (origin_id, requested_by) VALUES (p_origin, p_by)
  ON CONFLICT (origin_id) DO NOTHING;
  PERFORM pgrelay._cancel_apply(p_origin);
END
$$;

REVOKE ALL ON FUNCTION pgrelay._cancel_request(bigint, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
