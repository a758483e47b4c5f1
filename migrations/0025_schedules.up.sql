-- Periodic events: pgrelay.schedule() defines a named schedule (an interval,
-- p_every, or a cron expression, p_cron, in a time zone), pgrelay.unschedule()
-- removes it, and the Processor fires each tick once: in one transaction
-- holding the schedule's row lock it enqueues the event with
-- pgrelay.notify() and advances next_fire. A schedule is owned by a node
-- (owner_node, as the queue's rows are): in multi-node mode only its owner
-- fires it, and a dead node's schedules are adopted with its events
-- (_adopt_rows); in single mode any Processor of the database fires, in
-- leader mode the leader's node (_claim_scope, the claim's rule). After a
-- downtime a schedule fires once, then continues from the first tick after
-- now: missed ticks are not replayed one by one.
--
-- Cron expressions are computed in Go (github.com/robfig/cron/v3, standard
-- five fields); _cron_error checks them here, at schedule() time, with a
-- grammar no wider than the library's (a test compares the two). A cron
-- schedule's first next_fire is computed by the Processor that owns it (NULL
-- until then); an interval schedule's ticks are computed here.

-- ---------------------------------------------------------------------------
-- The table and the view
-- ---------------------------------------------------------------------------

-- schedule_defs: one row a schedule. anchor: when its timing was last set
-- (an interval schedule ticks at anchor + k × every; a cron schedule's first
-- tick is the first after it). next_fire: the next tick (NULL: a cron
-- schedule whose first tick no Processor has computed yet; 'infinity': a
-- cron expression that never matches). last_due: the tick the last fire was
-- for; last_fire: when it fired.
CREATE TABLE pgrelay.schedule_defs (
  name        text PRIMARY KEY,
  channel     text NOT NULL,
  payload     text NOT NULL,
  every       interval,
  cron        text,
  timezone    text NOT NULL DEFAULT 'UTC',
  owner_node  int NOT NULL DEFAULT pgrelay._this_node(),
  anchor      timestamptz NOT NULL DEFAULT now(),
  next_fire   timestamptz,
  last_due    timestamptz,
  last_fire   timestamptz,
  last_event  bigint,
  last_error  text,
  fires       bigint NOT NULL DEFAULT 0,
  created_by  name NOT NULL DEFAULT session_user,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT schedule_defs_one_timing CHECK ((every IS NULL) <> (cron IS NULL))
);

-- The scheduler's look-ups: a node's schedules by their next tick.
CREATE INDEX schedule_defs_owner_next ON pgrelay.schedule_defs (owner_node, next_fire);

CREATE VIEW pgrelay.schedules AS
SELECT s.name, s.channel, s.payload, s.every, s.cron, s.timezone, s.anchor,
       s.owner_node AS node, s.next_fire, s.last_due, s.last_fire, s.last_event,
       s.fires, s.last_error, s.created_by, s.created_at, s.updated_at
  FROM pgrelay.schedule_defs s;

REVOKE ALL ON pgrelay.schedule_defs, pgrelay.schedules FROM PUBLIC;
GRANT SELECT ON pgrelay.schedule_defs, pgrelay.schedules TO pgrelay_viewer;
GRANT SELECT, UPDATE ON pgrelay.schedule_defs TO pgrelay_processor;
GRANT SELECT ON pgrelay.schedules TO pgrelay_processor;  -- pgrelay stats

-- ---------------------------------------------------------------------------
-- Cron expressions
-- ---------------------------------------------------------------------------

-- _cron_value: field p_field's (1 minute .. 5 day of week) value p_token: a
-- number (1 to 9 digits), or a month (field 4) or day (field 5) name, any
-- case; NULL when it is neither.
CREATE FUNCTION pgrelay._cron_value(p_token text, p_field int) RETURNS int
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE
    WHEN p_token ~ '^[0-9]{1,9}$' THEN p_token::int
    WHEN p_field = 4 THEN pg_catalog.array_position(
      '{jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec}'::text[], pg_catalog.lower(p_token))
    WHEN p_field = 5 THEN pg_catalog.array_position(
      '{sun,mon,tue,wed,thu,fri,sat}'::text[], pg_catalog.lower(p_token)) - 1
  END
$$;

-- _cron_error: why p_cron is not a cron expression pgrelay accepts, NULL
-- when it is one. Accepted: one of @yearly @annually @monthly @weekly
-- @daily @midnight @hourly, or five fields (minute 0-59, hour 0-23, day of
-- month 1-31, month 1-12 or jan-dec, day of week 0-6 or sun-sat) separated
-- by spaces or tabs, each a comma-separated list of items: * or ?, a value,
-- or a range a-b, each optionally followed by /step (step > 0; a/step runs
-- from a to the field's maximum). This is robfig/cron/v3's standard parser
-- (ParseStandard) less what a schedule gives otherwise (@every: p_every;
-- TZ=/CRON_TZ=: p_timezone) and less its laxities (empty list items, a
-- range after *, signs): everything accepted here the library parses alike.
CREATE FUNCTION pgrelay._cron_error(p_cron text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_fields text[];
  v_min constant int[] := '{0,0,1,1,0}';
  v_max constant int[] := '{59,23,31,12,6}';
  v_name constant text[] := '{minute,hour,day of month,month,day of week}';
  v_item text;
  v_m text[];
  v_lo int;
  v_hi int;
BEGIN
  IF p_cron IS NULL THEN
    RETURN 'the expression is NULL';
  END IF;
  IF p_cron IN ('@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly') THEN
    RETURN NULL;
  END IF;
  IF p_cron ~ '^@every' THEN
    RETURN '@every is not a cron expression here: give the interval as p_every';
  ELSIF p_cron ~ '^@' THEN
    RETURN 'unknown descriptor (one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)';
  ELSIF p_cron ~ '^[ \t]*(CRON_)?TZ=' THEN
    RETURN 'give the time zone as p_timezone, not in the expression';
  END IF;
  IF p_cron !~ '^[ \t]*[^ \t]+([ \t]+[^ \t]+)*[ \t]*$' THEN
    RETURN 'fields are separated by spaces or tabs';
  END IF;
  v_fields := pg_catalog.regexp_split_to_array(pg_catalog.btrim(p_cron, E' \t'), E'[ \t]+');
  IF pg_catalog.cardinality(v_fields) <> 5 THEN
    RETURN pg_catalog.format('expected exactly 5 fields (minute hour day-of-month month day-of-week), found %s',
                             pg_catalog.cardinality(v_fields));
  END IF;
  FOR i IN 1 .. 5 LOOP
    FOREACH v_item IN ARRAY pg_catalog.string_to_array(v_fields[i], ',') LOOP
      v_m := pg_catalog.regexp_match(v_item, '^(?:([*?])|([A-Za-z0-9]+)(?:-([A-Za-z0-9]+))?)(?:/([0-9]{1,9}))?$');
      IF v_m IS NULL THEN
        RETURN pg_catalog.format('%s field: %L is not *, a value, a range a-b, or one of those with /step',
                                 v_name[i], v_item);
      END IF;
      IF v_m[1] IS NOT NULL THEN
        v_lo := v_min[i];
        v_hi := v_max[i];
      ELSE
        v_lo := pgrelay._cron_value(v_m[2], i);
        v_hi := CASE WHEN v_m[3] IS NOT NULL THEN pgrelay._cron_value(v_m[3], i)
                     WHEN v_m[4] IS NOT NULL THEN v_max[i]
                     ELSE v_lo END;
        IF v_lo IS NULL OR v_hi IS NULL THEN
          RETURN pg_catalog.format('%s field: %L has a value that is neither a number nor a name of the field',
                                   v_name[i], v_item);
        END IF;
      END IF;
      IF v_lo < v_min[i] OR v_hi > v_max[i] THEN
        RETURN pg_catalog.format('%s field: %L is outside %s-%s', v_name[i], v_item, v_min[i], v_max[i]);
      END IF;
      IF v_lo > v_hi THEN
        RETURN pg_catalog.format('%s field: %L begins after it ends', v_name[i], v_item);
      END IF;
      IF v_m[4] IS NOT NULL AND v_m[4]::int = 0 THEN
        RETURN pg_catalog.format('%s field: %L has a step of 0', v_name[i], v_item);
      END IF;
    END LOOP;
  END LOOP;
  RETURN NULL;
END
$$;

-- ---------------------------------------------------------------------------
-- Interval ticks
-- ---------------------------------------------------------------------------

-- _every_next: the first tick p_anchor + k × p_every (k >= 1) after p_after,
-- added on p_timezone's wall clock (so '1 day' keeps the time of day across
-- daylight saving changes, as '1 month' keeps the day of the month where it
-- can). Whatever the downtime, a handful of steps.
CREATE FUNCTION pgrelay._every_next(p_anchor timestamptz, p_every interval, p_timezone text, p_after timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
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

-- ---------------------------------------------------------------------------
-- schedule, unschedule
-- ---------------------------------------------------------------------------

-- schedule: creates schedule p_name, or changes it. Its timing unchanged
-- (every, cron and time zone), its ticks stay where they were (a deployment
-- script may run it again); changed, it counts from now. Admins only: a
-- schedule enqueues on any channel for as long as it exists.
CREATE FUNCTION pgrelay.schedule(p_name text, p_channel text, p_payload text,
                                 p_every interval DEFAULT NULL, p_cron text DEFAULT NULL,
                                 p_timezone text DEFAULT 'UTC')
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

-- unschedule: removes schedule p_name; false when there is none.
CREATE FUNCTION pgrelay.unschedule(p_name text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  DELETE FROM pgrelay.schedule_defs s WHERE s.name = p_name;
  RETURN FOUND;
END
$$;

REVOKE ALL ON FUNCTION pgrelay.schedule(text, text, text, interval, text, text),
  pgrelay.unschedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay.schedule(text, text, text, interval, text, text),
  pgrelay.unschedule(text) TO pgrelay_admin;
REVOKE ALL ON FUNCTION pgrelay._cron_value(text, int), pgrelay._cron_error(text),
  pgrelay._every_next(timestamptz, interval, text, timestamptz) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- The scheduler (the Processor)
-- ---------------------------------------------------------------------------

-- _schedules_due: the schedules this node may fire in the scope of the
-- claim (_claim_scope: every schedule in single mode and for the leader in
-- leader mode, the node's own in multi-node mode) whose tick is due or not
-- computed yet, locked for the caller's transaction (another Processor's
-- fire in progress is skipped: it advances next_fire). now: the
-- transaction's time, which every fire of it uses.
CREATE FUNCTION pgrelay._schedules_due(p_mode text, p_leader boolean, p_term bigint, p_limit int)
RETURNS TABLE (name text, cron text, timezone text, next_fire timestamptz, anchor timestamptz, now timestamptz)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_all bool;
  v_own bool;
BEGIN
  SELECT x.all_rows, x.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) x;
  RETURN QUERY
  SELECT s.name, s.cron, s.timezone, s.next_fire, s.anchor, now()
    FROM pgrelay.schedule_defs s
   WHERE (v_all OR (v_own AND s.owner_node = pgrelay._this_node()))
     AND (s.next_fire IS NULL OR s.next_fire <= now())
   ORDER BY s.next_fire NULLS FIRST
   LIMIT p_limit
     FOR UPDATE OF s SKIP LOCKED;
END
$$;

-- _schedule_fire: within the transaction of _schedules_due that locked it,
-- fires schedule p_name if its tick is due (a cron schedule's first tick not
-- computed yet is p_first) and advances next_fire to the first tick after
-- now (an interval's computed here, a cron expression's given, p_next), or
-- only records p_first. p_error: the cron expression could not be computed
-- (next_fire becomes 'infinity' until schedule() sets it again). A notify()
-- that fails (the channel was unregistered) is recorded in last_error and
-- the tick passes. Returns the event's id, NULL when nothing fired. As the
-- schema's owner: the Processor's role enqueues through notify() here only.
CREATE FUNCTION pgrelay._schedule_fire(p_name text, p_first timestamptz, p_next timestamptz, p_error text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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

-- _schedules_wake: seconds until the next tick this node may fire (as
-- _schedules_due chooses), 0 or less when one is due or not computed yet,
-- NULL when there is none (or only cron expressions that never match).
CREATE FUNCTION pgrelay._schedules_wake(p_mode text, p_leader boolean, p_term bigint) RETURNS float8
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_all bool;
  v_own bool;
  v_next timestamptz;
BEGIN
  SELECT x.all_rows, x.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) x;
  IF v_all THEN
    SELECT min(COALESCE(s.next_fire, '-infinity')) INTO v_next FROM pgrelay.schedule_defs s;
  ELSIF v_own THEN
    SELECT min(COALESCE(s.next_fire, '-infinity')) INTO v_next FROM pgrelay.schedule_defs s
     WHERE s.owner_node = pgrelay._this_node();
  END IF;
  IF v_next IS NULL OR v_next = 'infinity' THEN
    RETURN NULL;  -- none, or only expressions that never match
  ELSIF v_next = '-infinity' THEN
    RETURN 0;
  END IF;
  RETURN pg_catalog.date_part('epoch', v_next - pg_catalog.clock_timestamp());
END
$$;

REVOKE ALL ON FUNCTION pgrelay._schedules_due(text, boolean, bigint, int),
  pgrelay._schedule_fire(text, timestamptz, timestamptz, text),
  pgrelay._schedules_wake(text, boolean, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._schedules_due(text, boolean, bigint, int),
  pgrelay._schedule_fire(text, timestamptz, timestamptz, text),
  pgrelay._schedules_wake(text, boolean, bigint) TO pgrelay_processor;

-- ---------------------------------------------------------------------------
-- Adoption: a node's schedules go with its events
-- ---------------------------------------------------------------------------

-- _adopt_rows, as before, and the dead node's schedules: p_adopter owns
-- them now (it fires a tick missed meanwhile once, on its next pass). The
-- node returning settles before it fires anything (the rejoin), by which
-- time the change of owner has reached it.
CREATE OR REPLACE FUNCTION pgrelay._adopt_rows(p_dead int, p_adopter int, p_procs bigint[], p_why text)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n int;
BEGIN
  WITH t AS (
    SELECT q.id, q.origin_id, q.channel, q.attempt, q.dispatched_at IS NOT NULL AS was_claimed
      FROM pgrelay.queue q
     WHERE q.run_in_node IS NULL
       AND (q.owner_node = p_dead OR (q.dispatched_at IS NOT NULL AND q.dispatched_by = ANY (p_procs)))
     FOR UPDATE OF q SKIP LOCKED
  ), u AS (
    UPDATE pgrelay.queue q
       SET owner_node = CASE WHEN q.owner_node = p_dead THEN p_adopter ELSE q.owner_node END,
           dispatched_at = CASE WHEN q.dispatched_by = ANY (p_procs) THEN NULL ELSE q.dispatched_at END,
           dispatched_by = CASE WHEN q.dispatched_by = ANY (p_procs) THEN NULL ELSE q.dispatched_by END
      FROM t
     WHERE q.id = t.id
    RETURNING q.id
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error)
    SELECT t.id, t.origin_id, t.channel, t.attempt, 'adopted',
           pg_catalog.format('%s; adopted by node %s%s', p_why, p_adopter,
                             CASE WHEN t.was_claimed THEN ' (its claim was taken back)' ELSE '' END)
      FROM t WHERE t.id IN (SELECT u.id FROM u)
     ORDER BY t.id
    RETURNING 1
  )
  SELECT count(*) INTO n FROM lg;
  UPDATE pgrelay.schedule_defs s SET owner_node = p_adopter WHERE s.owner_node = p_dead;
  RETURN n;
END
$$;
