-- _lock_channel_exclusive: update()'s and unregister()'s lock on p_channel,
-- held until their transaction ends: waits for every producer holding the
-- channel, and keeps new ones waiting.

CREATE OR REPLACE FUNCTION pgrelay._lock_channel_exclusive(p_channel text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM FROM pgrelay.channel_locks l WHERE l.channel = p_channel ORDER BY l.slot FOR UPDATE;
  UPDATE pgrelay.channel_locks l SET changes = l.changes + 1 WHERE l.channel = p_channel;
  -- A producer of a channel without lock rows locks the channel's row.
  PERFORM FROM pgrelay.channels c WHERE c.channel = p_channel FOR UPDATE;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._lock_channel_exclusive(text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
