-- _every_next: the first tick p_anchor + k × p_every (k >= 1) after p_after,
-- added on p_timezone's wall clock (so '1 day' keeps the time of day across
-- daylight saving changes, as '1 month' keeps the day of the month where it
-- can). Whatever the downtime, a handful of steps.

CREATE OR REPLACE FUNCTION pgrelay._every_next(p_anchor timestamp with time zone, p_every interval, p_timezone text, p_after timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_secs float8 := pg_catalog.date_part('epoch', p_every);
  v_gone float8 := pg_catalog.date_part('epoch', p_after - p_anchor);
  v_k bigint;
  v_next timestamptz;
BEGIN
  IF pg_catalog.date_part('month', p_every) = 0 AND pg_catalog.date_part('year', p_every) = 0
     AND pg_catalog.date_part('day', p_every) = 0 THEN
    -- A duration: elapsed time, whatever the zone.
    v_k := GREATEST(1, pg_catalog.floor(v_gone / v_secs)::bigint + 1);
    v_next := p_anchor + v_k * p_every;
    IF v_next <= p_after THEN  -- rounding
      v_next := v_next + p_every;
    END IF;
    RETURN v_next;
  END IF;
  -- Days or months: on the zone's wall clock, from an estimate that cannot
  -- overshoot (a day may be 23 hours, a month 28 days against 30 counted).
  v_k := GREATEST(1, pg_catalog.floor(v_gone / (v_secs * 1.1))::bigint);
  LOOP
    v_next := ((p_anchor AT TIME ZONE p_timezone) + v_k * p_every) AT TIME ZONE p_timezone;
    EXIT WHEN v_next > p_after;
    v_k := v_k + 1;
  END LOOP;
  RETURN v_next;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._every_next(timestamp with time zone, interval, text, timestamp with time zone) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
