-- _trim_dead_letters: the janitor's retention: deletes up to p_batch dead
-- letters that ended more than p_older_than ago, oldest first (by
-- dead_letters_ended). Returns how many.

CREATE OR REPLACE FUNCTION pgrelay._trim_dead_letters(p_older_than interval, p_batch integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n int;
BEGIN
  DELETE FROM pgrelay.dead_letters d
   WHERE d.id = ANY (ARRAY(SELECT x.id FROM pgrelay.dead_letters x
                            WHERE x.ended_at < now() - p_older_than
                            ORDER BY x.ended_at LIMIT p_batch));
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._trim_dead_letters(interval, integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._trim_dead_letters(p_older_than interval, p_batch integer) TO pgrelay_processor;
