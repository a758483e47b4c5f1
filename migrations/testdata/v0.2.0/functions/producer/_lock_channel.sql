-- _lock_channel: a producer's lock on p_channel, held until its transaction
-- ends; waits only for an update() or unregister() of the channel. Says
-- nothing about whether the channel exists: the caller reads it afterwards,
-- in a statement of its own (so, under READ COMMITTED, with a snapshot taken
-- after any wait).

CREATE OR REPLACE FUNCTION pgrelay._lock_channel(p_channel text) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_start int := pg_catalog.pg_backend_pid() % 64;
BEGIN
  PERFORM FROM pgrelay.channel_locks l
   WHERE l.channel = p_channel AND l.slot >= v_start
   ORDER BY l.slot LIMIT 1
     FOR NO KEY UPDATE SKIP LOCKED;
  IF FOUND THEN
    RETURN;
  END IF;
  PERFORM FROM pgrelay.channel_locks l
   WHERE l.channel = p_channel AND l.slot < v_start
   ORDER BY l.slot LIMIT 1
     FOR NO KEY UPDATE SKIP LOCKED;
  IF FOUND THEN
    RETURN;
  END IF;
  -- Every row is held (by over 64 producers, or by an update() or
  -- unregister(), which this waits for), or the channel has none here.
  PERFORM FROM pgrelay.channel_locks l
   WHERE l.channel = p_channel AND l.slot = v_start
     FOR KEY SHARE;
  IF FOUND THEN
    RETURN;
  END IF;
  PERFORM FROM pgrelay.channels c WHERE c.channel = p_channel FOR KEY SHARE;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._lock_channel(text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
