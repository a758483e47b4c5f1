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

CREATE OR REPLACE FUNCTION pgrelay._cron_error(p_cron text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
$_$;

REVOKE ALL ON FUNCTION pgrelay._cron_error(text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
