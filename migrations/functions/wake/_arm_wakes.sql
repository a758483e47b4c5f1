-- _arm_wakes: as in 0001, but the table is counted only when the arming
-- armed nothing, and then only for emptiness: the slots are all there or
-- none is (an unlogged table starts empty after a crash; pgrelay's roles
-- delete none, and a producer whose slot is missing notifies anyway, see
-- _wake). The count of all 1024 rows ran on every arming, that is after
-- every notification, beside the batch or claim the notification started.

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
