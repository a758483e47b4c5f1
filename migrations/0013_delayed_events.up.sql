-- 0013: delayed events.
--
-- notify() and notify_many() take a due time: p_not_before (a timestamp) or
-- p_delay (an interval from now()), both NULL by default. The row's
-- not_before (the column retry backoff already uses, honoured by every claim
-- path) is that time; no claim takes the row before it, and the Processor's
-- poll picks it up once it is due.
--
-- * Both given: PR007. A negative delay or an infinite time: PR008. A time
--   not after now() (and a zero delay) means now: the call is an immediate
--   notify in every respect.
-- * Expiry counts from the due time: expires_at = due + expire_after, so a
--   24-hour delayed event of a channel with a 1-hour expiry can run.
-- * Deduplication: an identical pending row absorbs a notify only when both
--   are due at the same time. An immediate notify is absorbed as before by an
--   immediate row or a retry, and by a delayed row only once its time has
--   come (never one still waiting: that would make the notify wait). A
--   delayed notify is absorbed only by a delayed row with exactly the same
--   not_before (never an earlier or immediate row, which would run it early,
--   nor a retry). A delayed row is told by retry_of IS NULL AND not_before >
--   enqueued_at (immediate first attempts have not_before = enqueued_at;
--   retries carry retry_of).
-- * Lanes ('channel', 'payload') keep notification order: a delayed event
--   takes its place in its lane when notified and holds the lane until it
--   has run, as a retry in its backoff does.
--
-- The two-argument calls are unchanged in cost: without a delay no extra
-- statement runs. Adding defaulted parameters needs DROP + CREATE (an
-- overload would make two-argument calls ambiguous), so the grants are made
-- again; callers that name the functions by their argument types
-- (regprocedure) must add the two new ones.
-- ---------------------------------------------------------------------------

DROP FUNCTION pgrelay.notify(text, text);
DROP FUNCTION pgrelay.notify_many(text, text[]);
DROP FUNCTION pgrelay._enqueue_dedup(pgrelay.channels, text);

-- _due: the due time of a notify, NULL for now. The one place of the
-- argument rules; called only when a delay argument is given.
CREATE FUNCTION pgrelay._due(p_not_before timestamptz, p_delay interval) RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_due timestamptz;
BEGIN
  IF p_not_before IS NOT NULL AND p_delay IS NOT NULL THEN
    RAISE EXCEPTION 'pgrelay.notify: give p_not_before or p_delay, not both'
      USING ERRCODE = 'PR007', HINT = 'p_not_before is a point in time; p_delay counts from now().';
  END IF;
  IF p_delay < interval '0' THEN
    RAISE EXCEPTION 'pgrelay.notify: p_delay must not be negative, got %', p_delay USING ERRCODE = 'PR008';
  END IF;
  v_due := COALESCE(p_not_before, now() + p_delay);
  IF NOT pg_catalog.isfinite(v_due) THEN
    RAISE EXCEPTION 'pgrelay.notify: the due time must be finite, got %', v_due USING ERRCODE = 'PR008';
  END IF;
  IF v_due <= now() THEN
    RETURN NULL;
  END IF;
  RETURN v_due;
END
$$;

CREATE FUNCTION pgrelay.notify(p_channel text, p_payload text,
                               p_not_before timestamptz DEFAULT NULL, p_delay interval DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  v_id bigint;
  v_due timestamptz;
BEGIN
  PERFORM pgrelay._check_payload(p_channel, p_payload);
  IF p_not_before IS NOT NULL OR p_delay IS NOT NULL THEN
    v_due := pgrelay._due(p_not_before, p_delay);
  END IF;
  IF ch.deduplicate THEN
    RETURN pgrelay._enqueue_dedup(ch, p_payload, v_due);
  END IF;
  v_id := pgrelay._next_id();
  -- The columns _queue_before_insert derives, as it derives them (phash is
  -- NULL: the channel does not deduplicate).
  INSERT INTO pgrelay.queue (id, origin_id, channel, payload, run_in_node, lane, not_before, expires_at)
  VALUES (v_id, v_id, p_channel, p_payload,
          CASE WHEN ch.node_restricted THEN pgrelay._this_node() END,
          CASE ch.concurrency_mode
            WHEN 'channel' THEN 0
            WHEN 'payload' THEN pg_catalog.hashtextextended(p_payload, 0)
          END,
          COALESCE(v_due, now()),
          COALESCE(v_due, now()) + ch.expire_after);
  IF ch.publish_payload AND pg_catalog.current_setting('session_replication_role') = 'replica' THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload) VALUES (v_id, p_payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  RETURN v_id;
END
$$;

CREATE FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[],
                                    p_not_before timestamptz DEFAULT NULL, p_delay interval DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  p text;
  v_ids bigint[];
  v_node int;
  v_due timestamptz;
BEGIN
  IF p_payloads IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify_many: payloads must not be NULL' USING ERRCODE = 'PR005';
  END IF;
  FOREACH p IN ARRAY p_payloads LOOP
    PERFORM pgrelay._check_payload(p_channel, p);
  END LOOP;
  IF p_not_before IS NOT NULL OR p_delay IS NOT NULL THEN
    v_due := pgrelay._due(p_not_before, p_delay);
  END IF;
  IF ch.deduplicate THEN
    FOREACH p IN ARRAY p_payloads LOOP
      RETURN NEXT pgrelay._enqueue_dedup(ch, p, v_due);
    END LOOP;
    RETURN;
  END IF;
  v_ids := pgrelay._next_ids(COALESCE(pg_catalog.cardinality(p_payloads), 0));
  IF ch.node_restricted THEN
    v_node := pgrelay._this_node();
  END IF;
  v_due := COALESCE(v_due, now());
  RETURN QUERY
  WITH ins AS (
    INSERT INTO pgrelay.queue (id, origin_id, channel, payload, run_in_node, lane, not_before, expires_at)
    SELECT v_ids[u.n], v_ids[u.n], p_channel, u.payload, v_node,
           CASE ch.concurrency_mode
             WHEN 'channel' THEN 0
             WHEN 'payload' THEN pg_catalog.hashtextextended(u.payload, 0)
           END,
           v_due, v_due + ch.expire_after
      FROM pg_catalog.unnest(p_payloads) WITH ORDINALITY AS u(payload, n)
     ORDER BY u.n
    RETURNING id
  )
  SELECT ins.id FROM ins ORDER BY ins.id;
  IF ch.publish_payload AND pg_catalog.current_setting('session_replication_role') = 'replica' THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload)
    SELECT v_ids[u.n], u.payload FROM pg_catalog.unnest(p_payloads) WITH ORDINALITY AS u(payload, n)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
END
$$;

-- _enqueue_dedup: as in 0010, for an event due at p_due (NULL: now). Only a
-- row due at the same time absorbs it (see above).
CREATE FUNCTION pgrelay._enqueue_dedup(ch pgrelay.channels, p_payload text, p_due timestamptz)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_hash bigint := pg_catalog.hashtextextended(p_payload, 0);
  v_row record;
  v_id bigint;
BEGIN
  -- Two producers notifying the same payload at once: the second waits for the
  -- first to commit, then sees its row.
  PERFORM pg_catalog.pg_advisory_xact_lock(1886816818,
    pg_catalog.hashtext(ch.channel) # pg_catalog.hashint8(v_hash));
  SELECT q.id, q.origin_id, q.attempt INTO v_row
    FROM pgrelay.queue q
   WHERE q.channel = ch.channel AND q.phash = v_hash AND q.dispatched_at IS NULL
     AND q.payload = p_payload
     AND (NOT ch.node_restricted OR q.run_in_node = v_node)
     AND CASE WHEN p_due IS NULL
              -- Due now: an immediate row, a retry, or a delayed row whose time has come.
              THEN q.retry_of IS NOT NULL OR q.not_before <= GREATEST(q.enqueued_at, now())
              -- Delayed: a delayed row due at the same time.
              ELSE q.retry_of IS NULL AND q.not_before = p_due
         END
   ORDER BY q.origin_id
   LIMIT 1
     FOR SHARE OF q SKIP LOCKED;
  IF FOUND THEN
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, node)
    VALUES (v_row.id, pgrelay._next_id(), ch.channel, v_row.attempt, 'deduplicated', v_node);
    RETURN v_row.origin_id;
  END IF;
  v_id := pgrelay._next_id();
  INSERT INTO pgrelay.queue (id, origin_id, channel, payload, run_in_node, lane, phash, not_before, expires_at)
  VALUES (v_id, v_id, ch.channel, p_payload,
          CASE WHEN ch.node_restricted THEN v_node END,
          CASE ch.concurrency_mode WHEN 'channel' THEN 0 WHEN 'payload' THEN v_hash END,
          v_hash,
          COALESCE(p_due, now()),
          COALESCE(p_due, now()) + ch.expire_after);
  IF ch.publish_payload AND pg_catalog.current_setting('session_replication_role') = 'replica' THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload) VALUES (v_id, p_payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  RETURN v_id;
END
$$;

-- _queue_before_insert: as in 0010; a direct insert that sets not_before
-- later than its enqueued_at expires that long after its not_before (the
-- rule of notify()). Retry rows keep the expiry of their first attempt.
CREATE OR REPLACE FUNCTION pgrelay._queue_before_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels;
BEGIN
  IF NEW.origin_id IS NULL THEN
    PERFORM pgrelay._lock_channel(NEW.channel);
  END IF;
  SELECT * INTO ch FROM pgrelay.channels c WHERE c.channel = NEW.channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay: unknown channel %', pg_catalog.quote_literal(NEW.channel)
      USING ERRCODE = 'PR001';
  END IF;
  NEW.origin_id := COALESCE(NEW.origin_id, NEW.id);
  -- The pin is always worked out here, never taken from the caller.
  NEW.run_in_node := CASE WHEN ch.node_restricted THEN pgrelay._this_node() END;
  NEW.lane := CASE ch.concurrency_mode
                WHEN 'channel' THEN 0
                WHEN 'payload' THEN pg_catalog.hashtextextended(NEW.payload, 0)
              END;
  NEW.phash := CASE WHEN ch.deduplicate THEN pg_catalog.hashtextextended(NEW.payload, 0) END;
  IF NEW.retry_of IS NULL AND NEW.expires_at IS NULL AND ch.expire_after IS NOT NULL THEN
    NEW.expires_at := GREATEST(NEW.enqueued_at, NEW.not_before) + ch.expire_after;
  END IF;
  RETURN NEW;
END
$$;

REVOKE ALL ON FUNCTION
  pgrelay._due(timestamptz, interval),
  pgrelay.notify(text, text, timestamptz, interval),
  pgrelay.notify_many(text, text[], timestamptz, interval),
  pgrelay._enqueue_dedup(pgrelay.channels, text, timestamptz)
  FROM PUBLIC;
-- As 0001 and 0004 granted the two-argument functions.
GRANT EXECUTE ON FUNCTION
  pgrelay.notify(text, text, timestamptz, interval),
  pgrelay.notify_many(text, text[], timestamptz, interval)
  TO pgrelay_producer, pgrelay_admin;
GRANT EXECUTE ON FUNCTION pgrelay.notify(text, text, timestamptz, interval) TO pgrelay_notifier;
