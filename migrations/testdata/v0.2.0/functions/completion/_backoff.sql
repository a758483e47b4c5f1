-- _backoff: retry_delay * 2^(attempt-1), capped at max(retry_delay, 1 hour),
-- with +-20% jitter so retries of a burst of failures spread out.

CREATE OR REPLACE FUNCTION pgrelay._backoff(p_retry_delay interval, p_attempt integer) RETURNS interval
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT LEAST(p_retry_delay * pg_catalog.power(2, LEAST(GREATEST(p_attempt, 1) - 1, 20)),
               GREATEST(p_retry_delay, interval '1 hour'))
         * (0.8 + 0.4 * pg_catalog.random())
$$;

REVOKE ALL ON FUNCTION pgrelay._backoff(interval, integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._backoff(p_retry_delay interval, p_attempt integer) TO pgrelay_processor;
