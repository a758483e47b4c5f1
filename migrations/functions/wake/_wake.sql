-- _wake: wakes the Processors for an event just enqueued on p_channel. Under
-- READ COMMITTED it notifies only when the channel's slot (_wake_slot) is
-- armed, and disarms it; a slot another producer is disarming right now
-- (SKIP LOCKED) is left to that one, whose notification is on its way. A
-- missing slot (an unlogged table after a crash) or another isolation level
-- always notifies. The notification names the channel by its hint
-- (_wake_hint), never by its name.

CREATE OR REPLACE FUNCTION pgrelay._wake(p_channel text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_slot int := pgrelay._wake_slot(p_channel);
  v_armed bool;
BEGIN
  IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
    SELECT w.armed INTO v_armed FROM pgrelay.wake_slots w WHERE w.slot = v_slot;
    IF FOUND THEN
      IF NOT v_armed THEN
        RETURN;
      END IF;
      -- Armed: take it, unless another producer is taking it right now
      -- (that one's notification is on its way).
      UPDATE pgrelay.wake_slots w SET armed = false
       WHERE w.slot = (SELECT s.slot FROM pgrelay.wake_slots s
                        WHERE s.slot = v_slot AND s.armed
                        FOR UPDATE SKIP LOCKED);
      IF NOT FOUND THEN
        RETURN;
      END IF;
    END IF;
  END IF;
  PERFORM pg_catalog.pg_notify('pgrelay', pgrelay._wake_hint(p_channel));
END
$$;

REVOKE ALL ON FUNCTION pgrelay._wake(text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._wake(p_channel text) TO pgrelay_processor;
