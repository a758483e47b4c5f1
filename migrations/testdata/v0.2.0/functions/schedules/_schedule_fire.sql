-- _schedule_fire: within the transaction of _schedules_due that locked it,
-- fires schedule p_name if its tick is due (a cron schedule's first tick not
-- computed yet is p_first) and advances next_fire to the first tick after
-- now (an interval's computed here, a cron expression's given, p_next), or
-- only records p_first. p_error: the cron expression could not be computed
-- (next_fire becomes 'infinity' until schedule() sets it again). A notify()
-- that fails (the channel was unregistered) is recorded in last_error and
-- the tick passes. Returns the event's id, NULL when nothing fired. As the
-- schema's owner: the Processor's role enqueues through notify() here only.

CREATE OR REPLACE FUNCTION pgrelay._schedule_fire(p_name text, p_first timestamp with time zone, p_next timestamp with time zone, p_error text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  s pgrelay.schedule_defs;
  v_due timestamptz;
  v_id bigint;
  v_err text;
BEGIN
  SELECT * INTO s FROM pgrelay.schedule_defs x WHERE x.name = p_name FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF p_error IS NOT NULL THEN
    UPDATE pgrelay.schedule_defs x SET next_fire = 'infinity', last_error = p_error WHERE x.name = p_name;
    RETURN NULL;
  END IF;
  v_due := COALESCE(s.next_fire, p_first);
  IF v_due IS NULL OR v_due > now() THEN
    UPDATE pgrelay.schedule_defs x SET next_fire = v_due WHERE x.name = p_name AND x.next_fire IS DISTINCT FROM v_due;
    RETURN NULL;
  END IF;
  BEGIN
    v_id := pgrelay.notify(p_channel := s.channel, p_payload := s.payload);
  EXCEPTION WHEN OTHERS THEN
    v_err := pg_catalog.format('notify failed: %s (SQLSTATE %s)', SQLERRM, SQLSTATE);
  END;
  UPDATE pgrelay.schedule_defs x
     SET next_fire = CASE WHEN s.every IS NOT NULL THEN pgrelay._every_next(s.anchor, s.every, s.timezone, now())
                          ELSE p_next END,
         last_due = v_due, last_fire = now(), last_event = v_id, last_error = v_err,
         fires = x.fires + CASE WHEN v_id IS NOT NULL THEN 1 ELSE 0 END
   WHERE x.name = p_name;
  RETURN v_id;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._schedule_fire(text, timestamp with time zone, timestamp with time zone, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._schedule_fire(p_name text, p_first timestamp with time zone, p_next timestamp with time zone, p_error text) TO pgrelay_processor;
