-- _take_dead_letter: removes dead letter p_id and returns it, for p_caller
-- (retry, discard). An id that is not a dead letter (never was, or was
-- retried, discarded or trimmed already): PR050. Two calls for one id: the
-- second waits for the first and then raises PR050.

CREATE OR REPLACE FUNCTION pgrelay._take_dead_letter(p_id bigint, p_caller text) RETURNS pgrelay.dead_letters
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  dl pgrelay.dead_letters;
BEGIN
  DELETE FROM pgrelay.dead_letters d WHERE d.id = p_id RETURNING * INTO dl;
  IF NOT FOUND THEN
    RAISE EXCEPTION '%: % is not a dead letter', p_caller, COALESCE(p_id::text, 'NULL')
      USING ERRCODE = 'PR050',
      HINT = 'pgrelay dead list shows the dead letters; one retried, discarded or past the retention is gone.';
  END IF;
  RETURN dl;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._take_dead_letter(bigint, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
