-- _retry_dead: enqueues dead letter dl (already deleted by the caller) again
-- and returns the new queue id: the same channel, payload and priority (the
-- event's, not the channel's default; 0 for a dead letter that kept none), a
-- fresh attempt chain (attempt 1, due now, the channel's expire_after
-- counted from now), and the SAME origin_id, with retry_of naming the
-- attempt that ended:
-- status(origin_id) follows the retry, and the log tells the notification's
-- whole story under one id. The row is pinned to the node the dead event was
-- pinned to when its channel is node-restricted (to this node when it was
-- not pinned then), and not pinned otherwise; a pin to a decommissioned node
-- is refused (PR051): it could never run. An unregistered channel: PR001.
-- Writes the 'retried' log row (on the new queue row), and an email's
-- notification goes back to 'queued' (pgrelay_notifier.requeue). The row is
-- inserted stamped, as _enqueue does (the trigger would pin it here); it
-- takes the producer's lock on its channel first, as notify() does.

CREATE OR REPLACE FUNCTION pgrelay._retry_dead(dl pgrelay.dead_letters) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  ch pgrelay.channels;
  v_pin int;
  v_id bigint;
BEGIN
  PERFORM pgrelay._lock_channel(dl.channel);
  SELECT * INTO ch FROM pgrelay.channels c WHERE c.channel = dl.channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay.retry: dead letter % is of channel %, which is not registered', dl.id,
      pg_catalog.quote_literal(dl.channel) USING ERRCODE = 'PR001',
      HINT = 'Register the channel again, or discard the dead letter with pgrelay.discard().';
  END IF;
  v_pin := pgrelay._pin_of(ch.node_restricted, COALESCE(dl.run_in_node, v_node));
  IF v_pin IS NOT NULL AND EXISTS (SELECT FROM pgrelay.nodes x
                                    WHERE x.node_id = v_pin AND x.decommissioned_at IS NOT NULL) THEN
    RAISE EXCEPTION 'pgrelay.retry: dead letter % is pinned to node %, which was decommissioned', dl.id, v_pin
      USING ERRCODE = 'PR051',
      HINT = 'A row pinned to that node could never run; discard the dead letter with pgrelay.discard().';
  END IF;
  v_id := pgrelay._next_id();
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'on', true);
  INSERT INTO pgrelay.queue (id, origin_id, channel, payload, owner_node, run_in_node, attempt, retry_of,
                             enqueued_at, not_before, expires_at, lane, phash, priority)
  VALUES (v_id, dl.origin_id, dl.channel, dl.payload, COALESCE(v_pin, v_node), v_pin, 1, dl.id,
          now(), now(), pgrelay._expiry_of(ch.expire_after, now(), now()),
          pgrelay._lane_of(ch.concurrency_mode, dl.payload), pgrelay._phash_of(ch.deduplicate, dl.payload),
          COALESCE(dl.priority, 0));
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'off', true);
  PERFORM pgrelay._wake(ch.channel);
  IF ch.publish_payload THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload) VALUES (v_id, dl.payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node, priority)
  VALUES (v_id, dl.origin_id, dl.channel, 1, 'retried',
          pg_catalog.format('retried by %s: dead letter %s (%s after %s attempts) enqueued again as %s',
                            session_user, dl.id, dl.outcome, dl.attempts, v_id),
          v_node, NULLIF(dl.priority, 0));
  IF ch.kind = 'email' AND dl.notification_id IS NOT NULL THEN
    PERFORM pgrelay_notifier.requeue(dl.notification_id, dl.channel,
      pg_catalog.format('queued again: dead letter %s of event %s was retried by %s', dl.id, dl.origin_id,
                        session_user));
  END IF;
  RETURN v_id;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._retry_dead(pgrelay.dead_letters) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
