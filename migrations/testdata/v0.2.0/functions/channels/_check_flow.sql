-- _check_flow: the flow settings register() and update() store, checked
-- (PR009: priority, PR019: the limits).

CREATE OR REPLACE FUNCTION pgrelay._check_flow(p_channel text, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_priority IS NOT NULL AND (p_priority < -32768 OR p_priority > 32767) THEN
    RAISE EXCEPTION 'pgrelay: channel %: priority must be between -32768 and 32767, got %',
      p_channel, p_priority USING ERRCODE = 'PR009';
  END IF;
  IF p_max_in_flight IS NOT NULL AND p_max_in_flight < 0 THEN
    RAISE EXCEPTION 'pgrelay: channel %: max_in_flight must be positive (0: no limit), got %',
      p_channel, p_max_in_flight USING ERRCODE = 'PR019';
  END IF;
  IF p_rate_limit IS NOT NULL AND p_rate_limit < 0 THEN
    RAISE EXCEPTION 'pgrelay: channel %: rate_limit must be positive (0: no limit), got %',
      p_channel, p_rate_limit USING ERRCODE = 'PR019';
  END IF;
  IF p_rate_period IS NOT NULL AND (p_rate_period <= interval '0' OR p_rate_period > interval '1 day') THEN
    RAISE EXCEPTION 'pgrelay: channel %: rate_period must be positive and at most 1 day, got %',
      p_channel, p_rate_period USING ERRCODE = 'PR019';
  END IF;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._check_flow(text, integer, integer, integer, interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
