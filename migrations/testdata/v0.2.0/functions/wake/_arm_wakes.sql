-- _arm_wakes: arms the wake slots a Processor listens on. The table is
-- counted only when the arming armed nothing, and then only for emptiness:
-- the slots are all there or none is (an unlogged table starts empty after
-- a crash; pgrelay's roles delete none, and a producer whose slot is
-- missing notifies anyway, see _wake). Counting all 1024 rows at every
-- arming would cost that count after every notification.

CREATE OR REPLACE FUNCTION pgrelay._arm_wakes() RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_armed int;
BEGIN
  UPDATE pgrelay.wake_slots w SET armed = true WHERE NOT w.armed;
  GET DIAGNOSTICS v_armed = ROW_COUNT;
  IF v_armed = 0 AND NOT EXISTS (SELECT FROM pgrelay.wake_slots) THEN
    INSERT INTO pgrelay.wake_slots (slot, armed)
    SELECT g.s, true FROM pg_catalog.generate_series(0, 1023) AS g(s)
    ON CONFLICT (slot) DO NOTHING;
    GET DIAGNOSTICS v_armed = ROW_COUNT;
  END IF;
  RETURN v_armed;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._arm_wakes() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._arm_wakes() TO pgrelay_processor;
