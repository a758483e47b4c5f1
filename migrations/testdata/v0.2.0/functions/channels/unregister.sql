-- unregister: removes a channel, refusing one with pending or in-flight
-- events unless p_force discards them (PR004). Takes the channel exclusively
-- first; the channel's lock rows go with it, and a forced one also removes
-- the retry rows that completions it waited for scheduled meanwhile.

CREATE OR REPLACE FUNCTION pgrelay.unregister(p_channel text, p_force boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n bigint;
BEGIN
  PERFORM pgrelay._lock_channel_exclusive(p_channel);
  PERFORM FROM pgrelay.channels x WHERE x.channel = p_channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay: unknown channel %', COALESCE(pg_catalog.quote_literal(p_channel), 'NULL')
      USING ERRCODE = 'PR001';
  END IF;
  SELECT count(*) INTO n FROM pgrelay.queue q WHERE q.channel = p_channel;
  IF n > 0 AND NOT COALESCE(p_force, false) THEN
    RAISE EXCEPTION 'pgrelay: channel % still has % pending or in-flight events', p_channel, n
      USING ERRCODE = 'PR004', HINT = 'Wait for them, or pass p_force := true to discard them.';
  END IF;
  -- A completion that holds a row of the channel makes the DELETE wait, and
  -- the retry row it commits is not in the DELETE's snapshot: delete again
  -- until a new snapshot sees no row. (Producers are held off by the lock;
  -- a retry only comes from a row that was visible, so this ends.)
  LOOP
    DELETE FROM pgrelay.queue q WHERE q.channel = p_channel;
    EXIT WHEN NOT EXISTS (SELECT FROM pgrelay.queue q WHERE q.channel = p_channel);
  END LOOP;
  DELETE FROM pgrelay.channels x WHERE x.channel = p_channel;
  DELETE FROM pgrelay.channel_locks l WHERE l.channel = p_channel;
END
$$;

REVOKE ALL ON FUNCTION pgrelay.unregister(text, boolean) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.unregister(p_channel text, p_force boolean) TO pgrelay_admin;
