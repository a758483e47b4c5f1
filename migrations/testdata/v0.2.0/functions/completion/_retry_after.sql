-- _retry_after: a Go handler's RetryAfter(d, err): the event's attempt
-- p_ids[i] was just completed as failed (_complete, in the caller's
-- transaction), which enqueued its retry after the channel's backoff; the
-- retry is due after p_delays[i] instead. The retry is the row that is
-- retry_of the failed one (found through origin_id, indexed); when the
-- attempt was the last (gave_up) there is none. Returns the number of
-- retries moved.

CREATE OR REPLACE FUNCTION pgrelay._retry_after(p_ids bigint[], p_origin_ids bigint[], p_delays interval[]) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n int;
BEGIN
  UPDATE pgrelay.queue q
     SET not_before = now() + o.delay
    FROM unnest(p_ids, p_origin_ids, p_delays) AS o(id, origin_id, delay)
   WHERE q.origin_id = o.origin_id AND q.retry_of = o.id AND q.dispatched_at IS NULL
     AND o.delay IS NOT NULL AND o.delay >= interval '0';
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._retry_after(bigint[], bigint[], interval[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._retry_after(p_ids bigint[], p_origin_ids bigint[], p_delays interval[]) TO pgrelay_processor;
