-- 0006: a wake-up names its channel.
--
-- A statement that inserted the rows of one channel notifies with the
-- channel's name as payload, so that a Processor already running that
-- channel's batches starts one at once, without a claim first. Rows of
-- several channels still send one wake-up with an empty payload. NOTIFY
-- folds identical notifications of a transaction, so many notify() calls
-- on one channel in a transaction still cost one.
CREATE OR REPLACE FUNCTION pgrelay._queue_wake() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_first text;
  v_last text;
BEGIN
  SELECT min(n.channel), max(n.channel) INTO v_first, v_last FROM new_rows n;
  IF v_first IS NOT NULL THEN
    PERFORM pg_catalog.pg_notify('pgrelay', CASE WHEN v_first = v_last AND pg_catalog.octet_length(v_first) <= 200
                                                THEN v_first ELSE '' END);
  END IF;
  RETURN NULL;
END
$$;
