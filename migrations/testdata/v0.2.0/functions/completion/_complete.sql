-- What _complete_outcomes recorded, counted as _complete always counted it:
-- the outcomes applied (released, or deleted and logged).

CREATE OR REPLACE FUNCTION pgrelay._complete(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[]) RETURNS integer
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT o.done FROM pgrelay._complete_outcomes(p_processor, p_ids, p_claimed_at, p_events, p_errors) o
$$;

REVOKE ALL ON FUNCTION pgrelay._complete(bigint, bigint[], timestamp with time zone[], text[], text[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._complete(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[]) TO pgrelay_processor;
