-- queue_stats: one row per channel, cheap on a large queue. A channel's
-- pending rows are read through the queue_ready index, at most 100 000 of
-- them (the earliest ready first); past that, pending is the planner's
-- estimate and retrying is scaled from the rows read (pending_estimated is
-- then true). In-flight rows are few and always counted exactly.
-- pending_restricted is the pending count of a node-restricted channel (every
-- row of such a channel is pinned), 0 otherwise. VOLATILE because PostgreSQL
-- refuses EXPLAIN in a non-volatile function. Runs as its caller: every role
-- granted it may read the channels and the queue (and EXPLAIN them).

CREATE OR REPLACE FUNCTION pgrelay.queue_stats() RETURNS TABLE(channel text, pending bigint, pending_restricted bigint, in_flight bigint, retrying bigint, oldest_pending timestamp with time zone, kind text, concurrency_mode text, paused boolean, pending_estimated boolean)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
  c pgrelay.channels;
  v_inflight jsonb;
  v_n bigint;
  v_retry bigint;
  v_oldest timestamptz;
  v_plan json;
  v_est bigint;
BEGIN
  SELECT COALESCE(pg_catalog.jsonb_object_agg(f.channel, f.n), '{}')
    INTO v_inflight
    FROM (SELECT q.channel, count(*) AS n FROM pgrelay.queue q
           WHERE q.dispatched_at IS NOT NULL GROUP BY q.channel) f;
  FOR c IN SELECT * FROM pgrelay.channels x ORDER BY x.channel LOOP
    SELECT count(*), count(*) FILTER (WHERE s.attempt > 1), min(s.enqueued_at)
      INTO v_n, v_retry, v_oldest
      FROM (SELECT q.attempt, q.enqueued_at FROM pgrelay.queue q
             WHERE q.channel = c.channel AND q.dispatched_at IS NULL
             ORDER BY q.not_before LIMIT 100001) s;
    channel := c.channel;
    kind := c.kind;
    concurrency_mode := c.concurrency_mode;
    paused := c.paused;
    oldest_pending := v_oldest;
    in_flight := COALESCE((v_inflight ->> c.channel)::bigint, 0);
    pending_estimated := v_n > 100000;
    IF pending_estimated THEN
      EXECUTE pg_catalog.format('EXPLAIN (FORMAT JSON) SELECT 1 FROM pgrelay.queue q '
                                'WHERE q.channel = %L AND q.dispatched_at IS NULL', c.channel)
        INTO v_plan;
      v_est := GREATEST(v_n, ((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::numeric)::bigint);
      retrying := (v_retry::numeric * v_est / v_n)::bigint;
      pending := v_est;
    ELSE
      pending := v_n;
      retrying := v_retry;
    END IF;
    pending_restricted := CASE WHEN c.node_restricted THEN pending ELSE 0 END;
    RETURN NEXT;
  END LOOP;
END
$$;

REVOKE ALL ON FUNCTION pgrelay.queue_stats() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.queue_stats() TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay.queue_stats() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay.queue_stats() TO pgrelay_viewer;
