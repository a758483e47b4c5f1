-- retry: removes dead letter p_id (_take_dead_letter: PR050 when it is
-- none) and enqueues it again (_retry_dead); returns the new queue id.

CREATE OR REPLACE FUNCTION pgrelay.retry(p_id bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN pgrelay._retry_dead(pgrelay._take_dead_letter(p_id, 'pgrelay.retry'));
END
$$;

REVOKE ALL ON FUNCTION pgrelay.retry(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.retry(p_id bigint) TO pgrelay_admin;
