-- _enqueue: inserts the events p_ids (with p_payloads) of channel ch, due at
-- p_due (now when NULL), for notify(), notify_many(), _enqueue_dedup and
-- _enqueue_unique. Each row is stamped here with the stamping trigger's
-- helpers (_pin_of, _expiry_of, _lane_of, _phash_of) and the channel's
-- priority, once per statement, under pgrelay.stamped = 'on' so that the
-- trigger passes over them. Then the producer's trace context when it set
-- one and the channel keeps it (_store_traces), the channel's wake-up
-- (_wake), the payloads kept for NATS on a publish_payload channel and, on a
-- publish_enqueued channel, an 'enqueued' log row per event carrying its
-- priority (NULL for 0). No SET clause: only the producer functions, whose
-- search_path is pinned, call it.

CREATE OR REPLACE FUNCTION pgrelay._enqueue(ch pgrelay.channels, p_ids bigint[], p_payloads text[], p_due timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_node int := pgrelay._id_node(p_ids[1]);
  v_due timestamptz := COALESCE(p_due, now());
BEGIN
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'on', true);
  INSERT INTO pgrelay.queue (id, origin_id, channel, payload, owner_node, run_in_node, not_before,
                             expires_at, lane, phash, priority)
  SELECT u.id, u.id, ch.channel, u.payload, v_node, pgrelay._pin_of(ch.node_restricted, v_node), v_due,
         pgrelay._expiry_of(ch.expire_after, now(), v_due),
         pgrelay._lane_of(ch.concurrency_mode, u.payload), pgrelay._phash_of(ch.deduplicate, u.payload),
         ch.priority
    FROM ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_payloads)) AS u(id, payload);
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'off', true);
  IF pg_catalog.current_setting('pgrelay.traceparent', true) <> '' THEN
    PERFORM pgrelay._store_traces(ch.channel, p_ids);
  END IF;
  PERFORM pgrelay._wake(ch.channel);
  IF ch.publish_payload THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload)
    SELECT u.id, u.payload FROM ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_payloads)) AS u(id, payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  -- One event (notify()) takes its log id from _next_id(), which inlines;
  -- a batch from one _next_ids() call, whose fixed cost (a function of its
  -- own, with a SET clause) would triple the extra work of a single event.
  -- The k-th event gets the k-th log id: enqueued rows in the events' order.
  IF ch.publish_enqueued THEN
    IF pg_catalog.cardinality(p_ids) = 1 THEN
      INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, priority)
      VALUES (pgrelay._next_id(), p_ids[1], p_ids[1], ch.channel, 1, 'enqueued', v_node, NULLIF(ch.priority, 0));
    ELSE
      INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, priority)
      SELECT l.id, l.queue_id, l.queue_id, ch.channel, 1, 'enqueued', v_node, NULLIF(ch.priority, 0)
        FROM ROWS FROM (pg_catalog.unnest(pgrelay._next_ids(pg_catalog.cardinality(p_ids))),
                        pg_catalog.unnest(p_ids)) AS l(id, queue_id);
    END IF;
  END IF;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._enqueue(pgrelay.channels, bigint[], text[], timestamp with time zone) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
