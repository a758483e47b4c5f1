-- schedule: creates schedule p_name, or changes it. Its timing unchanged
-- (every, cron and time zone), its ticks stay where they were (a deployment
-- script may run it again); changed, it counts from now. Admins only: a
-- schedule enqueues on any channel for as long as it exists.

CREATE OR REPLACE FUNCTION pgrelay.schedule(p_name text, p_channel text, p_payload text, p_every interval DEFAULT NULL::interval, p_cron text DEFAULT NULL::text, p_timezone text DEFAULT 'UTC'::text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  v_why text;
BEGIN
  IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9_.:-]{1,100}$' THEN
    RAISE EXCEPTION 'pgrelay.schedule: invalid schedule name %', COALESCE(pg_catalog.quote_literal(p_name), 'NULL')
      USING ERRCODE = 'PR060', HINT = 'A name is 1 to 100 of A-Z a-z 0-9 _ . : -';
  END IF;
  IF p_channel IS NULL OR NOT EXISTS (SELECT FROM pgrelay.channels c WHERE c.channel = p_channel) THEN
    RAISE EXCEPTION 'pgrelay.schedule: unknown channel %', COALESCE(pg_catalog.quote_literal(p_channel), 'NULL')
      USING ERRCODE = 'PR001', HINT = 'Register it first: pgrelay.register().';
  END IF;
  IF p_payload IS NULL THEN
    RAISE EXCEPTION 'pgrelay.schedule: the payload is NULL' USING ERRCODE = 'PR005';
  END IF;
  IF (p_every IS NULL) = (p_cron IS NULL) THEN
    RAISE EXCEPTION 'pgrelay.schedule: give exactly one of p_every and p_cron'
      USING ERRCODE = 'PR061';
  END IF;
  IF p_every IS NOT NULL AND (p_every < interval '1 second'
       OR pg_catalog.date_part('year', p_every) < 0 OR pg_catalog.date_part('month', p_every) < 0
       OR pg_catalog.date_part('day', p_every) < 0
       OR p_every - pg_catalog.make_interval(years => pg_catalog.date_part('year', p_every)::int,
                                             months => pg_catalog.date_part('month', p_every)::int,
                                             days => pg_catalog.date_part('day', p_every)::int) < interval '0') THEN
    RAISE EXCEPTION 'pgrelay.schedule: p_every must be at least 1 second, with no negative part; got %', p_every
      USING ERRCODE = 'PR062';
  END IF;
  IF p_cron IS NOT NULL THEN
    v_why := pgrelay._cron_error(p_cron);
    IF v_why IS NOT NULL THEN
      RAISE EXCEPTION 'pgrelay.schedule: invalid cron expression %: %', pg_catalog.quote_literal(p_cron), v_why
        USING ERRCODE = 'PR063',
        HINT = 'Five fields (minute hour day-of-month month day-of-week), as "0 3 * * *", or @daily, @hourly, ...';
    END IF;
  END IF;
  IF p_timezone IS NULL OR NOT EXISTS (SELECT FROM pg_catalog.pg_timezone_names z WHERE z.name = p_timezone) THEN
    RAISE EXCEPTION 'pgrelay.schedule: unknown time zone %', COALESCE(pg_catalog.quote_literal(p_timezone), 'NULL')
      USING ERRCODE = 'PR064', HINT = 'A name of pg_timezone_names, as ''UTC'' or ''Europe/Paris''.';
  END IF;

  INSERT INTO pgrelay.schedule_defs AS s (name, channel, payload, every, cron, timezone, next_fire)
  VALUES (p_name, p_channel, p_payload, p_every, p_cron, p_timezone,
          CASE WHEN p_every IS NOT NULL THEN now() + p_every END)
  ON CONFLICT (name) DO UPDATE
    SET channel = EXCLUDED.channel, payload = EXCLUDED.payload, updated_at = now(), last_error = NULL,
        every = EXCLUDED.every, cron = EXCLUDED.cron, timezone = EXCLUDED.timezone,
        anchor = CASE WHEN (s.every, s.cron, s.timezone) IS NOT DISTINCT FROM (EXCLUDED.every, EXCLUDED.cron, EXCLUDED.timezone)
                      THEN s.anchor ELSE now() END,
        next_fire = CASE WHEN (s.every, s.cron, s.timezone) IS NOT DISTINCT FROM (EXCLUDED.every, EXCLUDED.cron, EXCLUDED.timezone)
                         THEN s.next_fire ELSE EXCLUDED.next_fire END;
END
$_$;

REVOKE ALL ON FUNCTION pgrelay.schedule(text, text, text, interval, text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.schedule(p_name text, p_channel text, p_payload text, p_every interval, p_cron text, p_timezone text) TO pgrelay_admin;
