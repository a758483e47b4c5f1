-- update: NULL keeps a setting; p_max_in_flight := 0 and p_rate_limit := 0
-- remove the limit (as p_expire_after := '0' clears the expiry);
-- p_rate_period alone changes the period of the channel's rate limit;
-- p_store_traces applies to the events enqueued from now on.

CREATE OR REPLACE FUNCTION pgrelay.update(p_channel text, p_handler text DEFAULT NULL::text, p_kind text DEFAULT NULL::text, p_concurrency_mode text DEFAULT NULL::text, p_deduplicate boolean DEFAULT NULL::boolean, p_node_restricted boolean DEFAULT NULL::boolean, p_max_attempts integer DEFAULT NULL::integer, p_retry_delay interval DEFAULT NULL::interval, p_expire_after interval DEFAULT NULL::interval, p_timeout interval DEFAULT NULL::interval, p_paused boolean DEFAULT NULL::boolean, p_publish_payload boolean DEFAULT NULL::boolean, p_publish_errors text DEFAULT NULL::text, p_publish_enqueued boolean DEFAULT NULL::boolean, p_priority integer DEFAULT NULL::integer, p_max_in_flight integer DEFAULT NULL::integer, p_rate_limit integer DEFAULT NULL::integer, p_rate_period interval DEFAULT NULL::interval, p_store_traces boolean DEFAULT NULL::boolean) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  old pgrelay.channels;
  c pgrelay.channels;
BEGIN
  PERFORM pgrelay._lock_channel_exclusive(p_channel);
  SELECT * INTO old FROM pgrelay.channels x WHERE x.channel = p_channel FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay: unknown channel %', COALESCE(pg_catalog.quote_literal(p_channel), 'NULL')
      USING ERRCODE = 'PR001';
  END IF;
  c := old;
  c.handler := COALESCE(p_handler, old.handler);
  c.kind := COALESCE(p_kind, old.kind);
  c.concurrency_mode := COALESCE(p_concurrency_mode, old.concurrency_mode);
  c.deduplicate := COALESCE(p_deduplicate, old.deduplicate);
  c.node_restricted := COALESCE(p_node_restricted, old.node_restricted);
  c.max_attempts := COALESCE(p_max_attempts, old.max_attempts);
  c.retry_delay := COALESCE(p_retry_delay, old.retry_delay);
  c.expire_after := CASE WHEN p_expire_after IS NULL THEN old.expire_after
                         WHEN p_expire_after = interval '0' THEN NULL
                         ELSE p_expire_after END;
  c.timeout := COALESCE(p_timeout, old.timeout);
  c.paused := COALESCE(p_paused, old.paused);
  c.publish_payload := COALESCE(p_publish_payload, old.publish_payload);
  c.publish_errors := COALESCE(p_publish_errors, old.publish_errors);
  c.publish_enqueued := COALESCE(p_publish_enqueued, old.publish_enqueued);
  c.store_traces := COALESCE(p_store_traces, old.store_traces);
  -- The handler is re-checked only when it or the kind changes: pausing a
  -- channel whose handler's function was dropped must still work.
  PERFORM pgrelay._check_channel(c, c.handler IS DISTINCT FROM old.handler OR c.kind IS DISTINCT FROM old.kind);
  PERFORM pgrelay._check_flow(p_channel, p_priority, p_max_in_flight, p_rate_limit, p_rate_period);
  c.priority := COALESCE(p_priority, old.priority);
  c.max_in_flight := CASE WHEN p_max_in_flight IS NULL THEN old.max_in_flight
                          ELSE NULLIF(p_max_in_flight, 0) END;
  IF p_rate_limit = 0 THEN
    IF p_rate_period IS NOT NULL THEN
      RAISE EXCEPTION 'pgrelay: channel %: rate_period needs a rate_limit (p_rate_limit := 0 removes it)',
        p_channel USING ERRCODE = 'PR019';
    END IF;
    c.rate_limit := NULL;
    c.rate_period := NULL;
  ELSE
    c.rate_limit := COALESCE(p_rate_limit, old.rate_limit);
    IF c.rate_limit IS NULL AND p_rate_period IS NOT NULL THEN
      RAISE EXCEPTION 'pgrelay: channel %: rate_period needs a rate_limit (the channel has none)',
        p_channel USING ERRCODE = 'PR019';
    END IF;
    c.rate_period := CASE WHEN c.rate_limit IS NOT NULL
                          THEN COALESCE(p_rate_period, old.rate_period, interval '1 second') END;
  END IF;
  UPDATE pgrelay.channels x
     SET handler = c.handler, kind = c.kind, concurrency_mode = c.concurrency_mode,
         deduplicate = c.deduplicate, node_restricted = c.node_restricted,
         max_attempts = c.max_attempts, retry_delay = c.retry_delay,
         expire_after = c.expire_after, timeout = c.timeout, paused = c.paused,
         publish_payload = c.publish_payload, publish_errors = c.publish_errors,
         publish_enqueued = c.publish_enqueued, priority = c.priority,
         max_in_flight = c.max_in_flight, rate_limit = c.rate_limit, rate_period = c.rate_period,
         store_traces = c.store_traces, updated_at = now()
   WHERE x.channel = p_channel;
  -- Rows not yet dispatched follow the new settings.
  --
  -- Rows in flight keep their claim, but take the new lane too: a channel
  -- made serialised must count what is already running as its lane's
  -- in-flight row, or the next claim starts a second one beside it. They are
  -- updated whenever a derived setting changes, so that each is locked until
  -- this transaction ends: a completion that comes meanwhile waits, and its
  -- retry row is then derived from the new settings.
  --
  -- A completion that already held a row makes these statements wait, and
  -- the retry row it commits is not in their snapshot: re-derive until a new
  -- snapshot sees no row with the old values. (Producers are held off by the
  -- channel lock; a retry only comes from a row that was visible.)
  -- A new default priority is for the events enqueued from now on: those
  -- queued keep theirs.
  IF c.concurrency_mode IS DISTINCT FROM old.concurrency_mode
     OR c.deduplicate IS DISTINCT FROM old.deduplicate
     OR c.node_restricted IS DISTINCT FROM old.node_restricted THEN
    LOOP
      UPDATE pgrelay.queue q
         SET lane = pgrelay._lane_of(c.concurrency_mode, q.payload),
             phash = pgrelay._phash_of(c.deduplicate, q.payload),
             run_in_node = CASE WHEN c.node_restricted THEN COALESCE(q.run_in_node, q.owner_node) END
       WHERE q.channel = p_channel AND q.dispatched_at IS NULL;
      UPDATE pgrelay.queue q
         SET lane = pgrelay._lane_of(c.concurrency_mode, q.payload)
       WHERE q.channel = p_channel AND q.dispatched_at IS NOT NULL;
      EXIT WHEN NOT EXISTS (
        SELECT FROM pgrelay.queue q
         WHERE q.channel = p_channel
           AND (q.lane IS DISTINCT FROM pgrelay._lane_of(c.concurrency_mode, q.payload)
                OR (q.dispatched_at IS NULL
                    AND (q.phash IS DISTINCT FROM pgrelay._phash_of(c.deduplicate, q.payload)
                         OR (q.run_in_node IS NULL) = c.node_restricted))));
    END LOOP;
  END IF;
END
$$;

REVOKE ALL ON FUNCTION pgrelay.update(text, text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, boolean, text, boolean, integer, integer, integer, interval, boolean) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.update(p_channel text, p_handler text, p_kind text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_paused boolean, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean) TO pgrelay_admin;
