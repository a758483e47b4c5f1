-- The wake hint in one place: what a wake-up names a channel by, the md5 of
-- this node's secret wake key and the channel's name, is computed here only.
-- The Processor asked for the key and computed the digest itself, a rule in
-- two places tied by a test; it now asks for each channel's hint
-- (store.WakeHints, once a channel).

-- What a wake-up names a channel by: the md5 of this node's secret wake key
-- and the channel's name, so that a login that LISTENs learns nothing of
-- channels (a forged notification costs one arming and a few claims). The
-- Processor asks for it (store.WakeHints) to find a wake-up's channel: the
-- digest is computed here only.
CREATE FUNCTION pgrelay._wake_hint(p_channel text) RETURNS text
LANGUAGE sql STABLE
RETURN (SELECT pg_catalog.md5(t.wake_key OPERATOR(pg_catalog.||) p_channel) FROM pgrelay.this_node t);

REVOKE ALL ON FUNCTION pgrelay._wake_hint(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._wake_hint(text) TO pgrelay_processor;

-- _wake sends it.

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
