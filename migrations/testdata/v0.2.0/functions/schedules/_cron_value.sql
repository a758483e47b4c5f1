-- _cron_value: field p_field's (1 minute .. 5 day of week) value p_token: a
-- number (1 to 9 digits), or a month (field 4) or day (field 5) name, any
-- case; NULL when it is neither.

CREATE OR REPLACE FUNCTION pgrelay._cron_value(p_token text, p_field integer) RETURNS integer
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
  SELECT CASE
    WHEN p_token ~ '^[0-9]{1,9}$' THEN p_token::int
    WHEN p_field = 4 THEN pg_catalog.array_position(
      '{jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec}'::text[], pg_catalog.lower(p_token))
    WHEN p_field = 5 THEN pg_catalog.array_position(
      '{sun,mon,tue,wed,thu,fri,sat}'::text[], pg_catalog.lower(p_token)) - 1
  END
$_$;

REVOKE ALL ON FUNCTION pgrelay._cron_value(text, integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
