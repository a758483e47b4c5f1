-- retry_all: retry() of every dead letter of p_channel that ended at or
-- after p_since (NULL: all of them), oldest first; returns how many. Dead
-- letters another transaction is retrying or discarding meanwhile are left
-- to it. A NULL channel: PR001.

CREATE OR REPLACE FUNCTION pgrelay.retry_all(p_channel text, p_since timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  dl pgrelay.dead_letters;
  n bigint := 0;
BEGIN
  IF p_channel IS NULL THEN
    RAISE EXCEPTION 'pgrelay.retry_all: channel must not be NULL' USING ERRCODE = 'PR001';
  END IF;
  FOR dl IN
    WITH x AS (
      DELETE FROM pgrelay.dead_letters d
       WHERE d.id IN (SELECT y.id FROM pgrelay.dead_letters y
                       WHERE y.channel = p_channel AND (p_since IS NULL OR y.ended_at >= p_since)
                       ORDER BY y.ended_at, y.id
                         FOR UPDATE SKIP LOCKED)
      RETURNING d.*
    )
    SELECT * FROM x ORDER BY x.ended_at, x.id
  LOOP
    PERFORM pgrelay._retry_dead(dl);
    n := n + 1;
  END LOOP;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay.retry_all(text, timestamp with time zone) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.retry_all(p_channel text, p_since timestamp with time zone) TO pgrelay_admin;
