-- discard: an admin ends a dead letter for good: it is taken from
-- pgrelay.dead_letters (the rights and the row's existence are checked by
-- _take_dead_letter) and its 'discarded' log row written by _discarded.

CREATE OR REPLACE FUNCTION pgrelay.discard(p_id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM pgrelay._discarded(pgrelay._take_dead_letter(p_id, 'pgrelay.discard'));
  RETURN true;
END
$$;

REVOKE ALL ON FUNCTION pgrelay.discard(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.discard(p_id bigint) TO pgrelay_admin;
