-- register, update and create_channel take the channel's settings as
-- named parameters, the newest last, so positional calls written for an
-- older release keep their meaning. p_priority is the channel's default
-- priority; p_max_in_flight and p_rate_limit/p_rate_period its flow limits:
-- at register, 0 (or NULL) sets no limit; p_rate_period defaults to 1
-- second once p_rate_limit is set, and needs one. p_store_traces false: the
-- channel keeps no producer's trace context (_store_traces); NULL means
-- the default, true.

CREATE OR REPLACE FUNCTION pgrelay.register(p_channel text, p_handler text, p_kind text DEFAULT 'sql'::text, p_concurrency_mode text DEFAULT 'none'::text, p_deduplicate boolean DEFAULT false, p_node_restricted boolean DEFAULT false, p_max_attempts integer DEFAULT 5, p_retry_delay interval DEFAULT '00:00:01'::interval, p_expire_after interval DEFAULT NULL::interval, p_timeout interval DEFAULT '00:00:30'::interval, p_publish_payload boolean DEFAULT false, p_publish_errors text DEFAULT 'class'::text, p_publish_enqueued boolean DEFAULT false, p_priority integer DEFAULT 0, p_max_in_flight integer DEFAULT NULL::integer, p_rate_limit integer DEFAULT NULL::integer, p_rate_period interval DEFAULT NULL::interval, p_store_traces boolean DEFAULT NULL::boolean) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  c pgrelay.channels;
  old pgrelay.channels;
  v_diff text[] := '{}';
BEGIN
  c.channel := p_channel;
  c.handler := p_handler;
  c.kind := p_kind;
  c.concurrency_mode := p_concurrency_mode;
  c.deduplicate := COALESCE(p_deduplicate, false);
  c.node_restricted := COALESCE(p_node_restricted, false);
  c.max_attempts := p_max_attempts;
  c.retry_delay := p_retry_delay;
  c.expire_after := p_expire_after;
  c.timeout := p_timeout;
  c.publish_payload := COALESCE(p_publish_payload, false);
  c.publish_errors := p_publish_errors;
  c.publish_enqueued := COALESCE(p_publish_enqueued, false);
  c.store_traces := COALESCE(p_store_traces, true);
  PERFORM pgrelay._check_channel(c);
  PERFORM pgrelay._check_flow(p_channel, p_priority, p_max_in_flight, p_rate_limit, p_rate_period);
  IF p_rate_period IS NOT NULL AND COALESCE(p_rate_limit, 0) = 0 THEN
    RAISE EXCEPTION 'pgrelay: channel %: rate_period needs a rate_limit', p_channel USING ERRCODE = 'PR019';
  END IF;
  c.priority := COALESCE(p_priority, 0);
  c.max_in_flight := NULLIF(p_max_in_flight, 0);
  c.rate_limit := NULLIF(p_rate_limit, 0);
  c.rate_period := CASE WHEN c.rate_limit IS NOT NULL THEN COALESCE(p_rate_period, interval '1 second') END;
  LOOP
    INSERT INTO pgrelay.channels (channel, handler, kind, concurrency_mode, deduplicate,
                                  node_restricted, max_attempts, retry_delay, expire_after, timeout,
                                  publish_payload, publish_errors, publish_enqueued,
                                  priority, max_in_flight, rate_limit, rate_period, store_traces)
    VALUES (c.channel, c.handler, c.kind, c.concurrency_mode, c.deduplicate,
            c.node_restricted, c.max_attempts, c.retry_delay, c.expire_after, c.timeout,
            c.publish_payload, c.publish_errors, c.publish_enqueued,
            c.priority, c.max_in_flight, c.rate_limit, c.rate_period, c.store_traces)
    ON CONFLICT (channel) DO NOTHING;
    IF FOUND THEN
      RETURN;
    END IF;
    SELECT * INTO old FROM pgrelay.channels x WHERE x.channel = p_channel;
    EXIT WHEN FOUND;
    -- Unregistered between the two statements: insert again.
  END LOOP;
  IF old.handler IS DISTINCT FROM c.handler THEN
    v_diff := v_diff || pg_catalog.format('handler (%s registered, %s given)',
      pg_catalog.quote_literal(old.handler), pg_catalog.quote_literal(c.handler));
  END IF;
  IF old.kind IS DISTINCT FROM c.kind THEN
    v_diff := v_diff || pg_catalog.format('kind (%s registered, %s given)', old.kind, c.kind);
  END IF;
  IF old.concurrency_mode IS DISTINCT FROM c.concurrency_mode THEN
    v_diff := v_diff || pg_catalog.format('concurrency_mode (%s registered, %s given)',
      old.concurrency_mode, c.concurrency_mode);
  END IF;
  IF old.deduplicate IS DISTINCT FROM c.deduplicate THEN
    v_diff := v_diff || pg_catalog.format('deduplicate (%s registered, %s given)', old.deduplicate, c.deduplicate);
  END IF;
  IF old.node_restricted IS DISTINCT FROM c.node_restricted THEN
    v_diff := v_diff || pg_catalog.format('node_restricted (%s registered, %s given)',
      old.node_restricted, c.node_restricted);
  END IF;
  IF old.max_attempts IS DISTINCT FROM c.max_attempts THEN
    v_diff := v_diff || pg_catalog.format('max_attempts (%s registered, %s given)', old.max_attempts, c.max_attempts);
  END IF;
  IF old.retry_delay IS DISTINCT FROM c.retry_delay THEN
    v_diff := v_diff || pg_catalog.format('retry_delay (%s registered, %s given)', old.retry_delay, c.retry_delay);
  END IF;
  IF old.expire_after IS DISTINCT FROM c.expire_after THEN
    v_diff := v_diff || pg_catalog.format('expire_after (%s registered, %s given)',
      COALESCE(old.expire_after::text, 'NULL'), COALESCE(c.expire_after::text, 'NULL'));
  END IF;
  IF old.timeout IS DISTINCT FROM c.timeout THEN
    v_diff := v_diff || pg_catalog.format('timeout (%s registered, %s given)', old.timeout, c.timeout);
  END IF;
  IF old.publish_payload IS DISTINCT FROM c.publish_payload THEN
    v_diff := v_diff || pg_catalog.format('publish_payload (%s registered, %s given)',
      old.publish_payload, c.publish_payload);
  END IF;
  IF old.publish_errors IS DISTINCT FROM c.publish_errors THEN
    v_diff := v_diff || pg_catalog.format('publish_errors (%s registered, %s given)',
      old.publish_errors, c.publish_errors);
  END IF;
  IF old.publish_enqueued IS DISTINCT FROM c.publish_enqueued THEN
    v_diff := v_diff || pg_catalog.format('publish_enqueued (%s registered, %s given)',
      old.publish_enqueued, c.publish_enqueued);
  END IF;
  IF old.priority IS DISTINCT FROM c.priority THEN
    v_diff := v_diff || pg_catalog.format('priority (%s registered, %s given)', old.priority, c.priority);
  END IF;
  IF old.max_in_flight IS DISTINCT FROM c.max_in_flight THEN
    v_diff := v_diff || pg_catalog.format('max_in_flight (%s registered, %s given)',
      COALESCE(old.max_in_flight::text, 'NULL'), COALESCE(c.max_in_flight::text, 'NULL'));
  END IF;
  IF old.rate_limit IS DISTINCT FROM c.rate_limit OR old.rate_period IS DISTINCT FROM c.rate_period THEN
    v_diff := v_diff || pg_catalog.format('rate limit (%s per %s registered, %s per %s given)',
      COALESCE(old.rate_limit::text, 'NULL'), COALESCE(old.rate_period::text, 'NULL'),
      COALESCE(c.rate_limit::text, 'NULL'), COALESCE(c.rate_period::text, 'NULL'));
  END IF;
  IF old.store_traces IS DISTINCT FROM c.store_traces THEN
    v_diff := v_diff || pg_catalog.format('store_traces (%s registered, %s given)', old.store_traces, c.store_traces);
  END IF;
  IF pg_catalog.cardinality(v_diff) > 0 THEN
    RAISE EXCEPTION 'pgrelay: channel % already exists with a different definition: %',
      pg_catalog.quote_literal(p_channel), pg_catalog.array_to_string(v_diff, ', ')
      USING ERRCODE = 'PR003',
            HINT = 'Use pgrelay.update() to change it; registering an identical definition again is a no-op.';
  END IF;
END
$$;

REVOKE ALL ON FUNCTION pgrelay.register(text, text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, text, boolean, integer, integer, integer, interval, boolean) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.register(p_channel text, p_handler text, p_kind text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean) TO pgrelay_admin;
