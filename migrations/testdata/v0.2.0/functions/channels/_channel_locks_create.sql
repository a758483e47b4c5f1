-- _channel_locks_create: a channel's lock rows, wherever its row appears
-- (register() or replication).

CREATE OR REPLACE FUNCTION pgrelay._channel_locks_create() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  INSERT INTO pgrelay.channel_locks (channel, slot)
  SELECT NEW.channel, s.slot FROM pg_catalog.generate_series(0, 63) AS s(slot)
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._channel_locks_create() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;

CREATE OR REPLACE TRIGGER channels_locks AFTER INSERT ON pgrelay.channels FOR EACH ROW EXECUTE FUNCTION pgrelay._channel_locks_create();

ALTER TABLE pgrelay.channels ENABLE ALWAYS TRIGGER channels_locks;
