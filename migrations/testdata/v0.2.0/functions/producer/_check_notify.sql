-- _check_notify: the checks notify() and notify_many() share; returns the
-- channel, read after taking the producer's lock on it (_lock_channel), so
-- under READ COMMITTED it is read after any update() or unregister() it
-- waited for. A paused channel is accepted: pausing a channel must never roll
-- back the application's own transactions. The events wait, pending (the
-- claims pass over paused channels), until update() resumes the channel.

CREATE OR REPLACE FUNCTION pgrelay._check_notify(p_channel text) RETURNS pgrelay.channels
    LANGUAGE plpgsql
    AS $$
DECLARE
  ch pgrelay.channels;
BEGIN
  IF p_channel IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify: channel must not be NULL' USING ERRCODE = 'PR001';
  END IF;
  PERFORM pgrelay._lock_channel(p_channel);
  SELECT * INTO ch FROM pgrelay.channels c WHERE c.channel = p_channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay.notify: unknown channel %', pg_catalog.quote_literal(p_channel)
      USING ERRCODE = 'PR001', HINT = 'Register it first with pgrelay.register().';
  END IF;
  RETURN ch;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._check_notify(text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
