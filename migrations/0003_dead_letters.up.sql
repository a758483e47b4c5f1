-- Dead letters: an event that ends 'gave_up' or 'expired' keeps its payload
-- in pgrelay.dead_letters, written in the same transaction as that log row,
-- so that an admin can retry it (pgrelay.retry, retry_all) or discard it
-- (pgrelay.discard). Both write a log row of their own ('retried',
-- 'discarded'). The Processor's janitor trims dead letters older than
-- --dead-letter-retention (_trim_dead_letters).
--
-- Outcomes 'gave_up' and 'expired' are written in three places, each
-- replaced below with the dead letter added to the statement that deletes
-- the queue row: _complete (a failed last attempt, an expired event; claims
-- and direct batches), _rescue (a claim taken back on its last attempt) and
-- decommission (the rows pinned to a node that is gone). The columns of a
-- dead letter come from the deleted queue row and _notification_of.

-- ---------------------------------------------------------------------------
-- The table
-- ---------------------------------------------------------------------------

-- One row per event that ended without success and was neither retried nor
-- discarded yet. id is the queue id of the attempt that ended, origin_id the
-- id notify() returned; node is the node that ended it (its Processor, or
-- the node decommission() ran on), run_in_node the node a node-restricted
-- event was pinned to, notification_id the notification an email event
-- carried. Replicated like pgrelay.log on a multi-master cluster.
CREATE TABLE pgrelay.dead_letters (
  id              bigint PRIMARY KEY,
  origin_id       bigint NOT NULL,
  channel         text NOT NULL,
  payload         text NOT NULL,
  attempts        int NOT NULL,
  last_error      text NULL,
  outcome         text NOT NULL,
  ended_at        timestamptz NOT NULL,
  node            int NOT NULL,
  run_in_node     int NULL,
  notification_id bigint NULL,
  CONSTRAINT dead_letters_outcome CHECK (outcome IN ('gave_up', 'expired'))
);
-- Listing a channel's dead letters, newest first, and retry_all's since.
CREATE INDEX dead_letters_channel_ended ON pgrelay.dead_letters (channel, ended_at);
-- Retention trims the oldest.
CREATE INDEX dead_letters_ended ON pgrelay.dead_letters (ended_at);

-- The log gains two events: 'retried' (a dead letter enqueued again, on the
-- new queue row) and 'discarded' (a dead letter removed for good, on the
-- queue row that ended).
ALTER TABLE pgrelay.log DROP CONSTRAINT log_event;
ALTER TABLE pgrelay.log ADD CONSTRAINT log_event
  CHECK (event IN ('succeeded', 'failed', 'gave_up', 'expired', 'deduplicated', 'adopted', 'rescued',
                   'retried', 'discarded'));

-- _notification_of: the notification an event of a channel of kind p_kind
-- carries (an email event's payload is its notification id), else NULL.
-- Inlined like _lane_of.
CREATE FUNCTION pgrelay._notification_of(p_kind text, p_payload text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_kind = 'email' AND p_payload ~ '^[0-9]{1,18}$' THEN p_payload::bigint END;

-- ---------------------------------------------------------------------------
-- Where events end: _complete, _rescue, decommission
-- ---------------------------------------------------------------------------

-- _complete: applies a batch of outcomes of Processor p_processor's claims.
-- p_events: 'succeeded', 'failed' (retried after _backoff, or 'gave_up' at
-- max_attempts), 'expired', or 'release' (claimed but never started: back to
-- pending). An outcome applies only while the claim is still the one it was
-- made for (same processor and claim time): a claim that was rescued
-- meanwhile is left alone. With p_processor NULL it completes the rows a
-- direct batch holds locked in the caller's transaction (unclaimed rows;
-- p_claimed_at is ignored). Log rows take their ids from one _next_ids call.
-- An event that ends 'gave_up' or 'expired' becomes a dead letter in the same
-- statement. Returns the number of outcomes applied.
CREATE OR REPLACE FUNCTION pgrelay._complete(p_processor bigint, p_ids bigint[], p_claimed_at timestamptz[],
                                  p_events text[], p_errors text[])
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_released int;
  v_done int;
BEGIN
  -- Only when there is something to release: the planner, which expects one
  -- row of the processor's in flight, would join every one of them (often
  -- ~1000) with the whole batch.
  v_released := 0;
  IF 'release' = ANY (p_events) THEN
    WITH o AS (
      SELECT * FROM unnest(p_ids, p_claimed_at, p_events) AS o(id, claimed_at, event)
       WHERE o.event = 'release'
    ), rel AS (
      UPDATE pgrelay.queue q
         SET dispatched_at = NULL, dispatched_by = NULL
        FROM o
       WHERE q.id = o.id AND q.dispatched_by = p_processor AND q.dispatched_at = o.claimed_at
      RETURNING q.id
    )
    SELECT count(*) INTO v_released FROM rel;
  END IF;

  WITH o AS (
    SELECT * FROM unnest(p_ids, p_claimed_at, p_events, p_errors)
             AS o(id, claimed_at, event, error)
     WHERE o.event <> 'release'
  ), del AS (
    DELETE FROM pgrelay.queue q
     USING o
     WHERE q.id = o.id
       AND CASE WHEN p_processor IS NULL THEN q.dispatched_at IS NULL
                ELSE q.dispatched_by = p_processor AND q.dispatched_at = o.claimed_at END
    RETURNING q.*, o.event AS o_event, o.error AS o_error
  ), d AS (
    SELECT del.*, c.retry_delay, c.kind,
           CASE WHEN del.o_event = 'failed' AND del.attempt >= COALESCE(c.max_attempts, 0)
                THEN 'gave_up' ELSE del.o_event END AS final
      FROM del LEFT JOIN pgrelay.channels c ON c.channel = del.channel
  ), ids AS (
    SELECT pgrelay._next_ids((SELECT count(*) FROM d)::int) AS a
  ), lg AS (
    INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, error, node)
    SELECT ids.a[x.rn], x.id, x.origin_id, x.channel, x.attempt, x.final,
           CASE WHEN x.o_error IS NULL THEN NULL ELSE pg_catalog.left(x.o_error, 8000) END, v_node
      FROM (SELECT d.*, pg_catalog.row_number() OVER (ORDER BY d.id) AS rn FROM d) x, ids
     ORDER BY x.id
    RETURNING 1
  ), rt AS (
    INSERT INTO pgrelay.queue (origin_id, channel, payload, attempt, retry_of, enqueued_at,
                               not_before, expires_at)
    SELECT d.origin_id, d.channel, d.payload, d.attempt + 1, d.id, d.enqueued_at,
           now() + pgrelay._backoff(d.retry_delay, d.attempt), d.expires_at
      FROM d
     WHERE d.final = 'failed' AND d.retry_delay IS NOT NULL
     ORDER BY d.id
    RETURNING 1
  ), dl AS (
    INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, last_error, outcome,
                                      ended_at, node, run_in_node, notification_id)
    SELECT d.id, d.origin_id, d.channel, d.payload, d.attempt,
           CASE WHEN d.o_error IS NULL THEN NULL ELSE pg_catalog.left(d.o_error, 8000) END, d.final,
           pg_catalog.clock_timestamp(), v_node, d.run_in_node, pgrelay._notification_of(d.kind, d.payload)
      FROM d
     WHERE d.final IN ('gave_up', 'expired')
     ORDER BY d.id
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM lg) INTO v_done;

  RETURN v_released + v_done;
END
$$;

-- _rescue: takes back claims that will never complete: those of this node's
-- Processor instances that stopped heartbeating for p_dead_after, and those
-- held past their channel's timeout plus p_lease_grace (a live but stuck
-- instance, or an instance whose row is gone). A row pinned to another node
-- is left alone: only its node, or a decommission, ever changes it. A
-- taken-back claim counts as an attempt, as a crash or hang of the Processor
-- while the handler ran may be the event's own doing: the row goes back to
-- pending with attempt + 1 and a 'rescued' log row, or, when that was its
-- last attempt, ends 'gave_up'. So an event that kills its Processor cannot
-- loop forever.
--
-- The Processor never sees a given-up event again, so for an email channel
-- nothing else would move its notification out of 'sending': it is failed
-- here, in the same transaction as the 'gave_up' row, through
-- pgrelay_notifier.fail_for_event (executable by pgrelay_processor), as the
-- email handler would: only if this event may send it (the send gate), never
-- a notification another event holds or sent, nor another channel's. A
-- given-up event becomes a dead letter in the statement that deletes it.
CREATE OR REPLACE FUNCTION pgrelay._rescue(p_processor bigint, p_dead_after interval, p_lease_grace interval)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_dead bigint[];
  n int;
  v_emails bigint[];
  v_whys text[];
  v_channels text[];
  v_events bigint[];
BEGIN
  WITH dead AS (
    DELETE FROM pgrelay.processors p
     WHERE p.node_id = v_node AND p.processor_id <> p_processor
       AND p.last_seen < now() - p_dead_after
    RETURNING p.processor_id
  )
  SELECT COALESCE(pg_catalog.array_agg(dead.processor_id), '{}') INTO v_dead FROM dead;

  -- The holder is read before the update (RETURNING would see it cleared).
  -- A row pinned to another node is that node's, whoever holds it: only
  -- that node (or a decommission) changes it.
  WITH held AS (
    SELECT q.id, q.origin_id, q.channel, q.attempt, COALESCE(c.max_attempts, 0) AS max_attempts,
           CASE WHEN q.dispatched_by = ANY (v_dead)
                THEN pg_catalog.format('processor %s stopped heartbeating while running attempt %s',
                                       q.dispatched_by, q.attempt)
                ELSE pg_catalog.format('claim lease expired: processor %s held attempt %s past the channel timeout plus %s',
                                       q.dispatched_by, q.attempt, p_lease_grace)
           END AS why
      FROM pgrelay.queue q
      LEFT JOIN pgrelay.channels c ON c.channel = q.channel
     WHERE q.dispatched_at IS NOT NULL
       AND (q.run_in_node IS NULL OR q.run_in_node = v_node)
       AND (q.dispatched_by = ANY (v_dead)
            OR (q.dispatched_at < now() - COALESCE(c.timeout, interval '0') - p_lease_grace
                AND (EXISTS (SELECT FROM pgrelay.processors p
                              WHERE p.processor_id = q.dispatched_by AND p.node_id = v_node)
                     OR NOT EXISTS (SELECT FROM pgrelay.processors p
                                     WHERE p.processor_id = q.dispatched_by))))
     FOR UPDATE OF q SKIP LOCKED
  ), back AS (
    UPDATE pgrelay.queue q
       SET dispatched_at = NULL, dispatched_by = NULL, attempt = q.attempt + 1
      FROM held
     WHERE q.id = held.id AND held.attempt < held.max_attempts
    RETURNING q.id
  ), gone AS (
    DELETE FROM pgrelay.queue q
     USING held
     WHERE q.id = held.id AND held.attempt >= held.max_attempts
    RETURNING q.id, q.channel, q.payload, q.run_in_node
  ), dl AS (
    INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, last_error, outcome,
                                      ended_at, node, run_in_node, notification_id)
    SELECT gone.id, held.origin_id, gone.channel, gone.payload, held.attempt,
           held.why || ' (its last attempt)', 'gave_up', pg_catalog.clock_timestamp(), v_node,
           gone.run_in_node, pgrelay._notification_of(c.kind, gone.payload)
      FROM gone
      JOIN held ON held.id = gone.id
      LEFT JOIN pgrelay.channels c ON c.channel = gone.channel
     ORDER BY gone.id
    RETURNING 1
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node)
    SELECT held.id, held.origin_id, held.channel, held.attempt,
           CASE WHEN held.attempt < held.max_attempts THEN 'rescued' ELSE 'gave_up' END,
           CASE WHEN held.attempt < held.max_attempts THEN held.why
                ELSE held.why || ' (its last attempt)' END,
           v_node
      FROM held
     WHERE held.id IN (SELECT back.id FROM back UNION ALL SELECT gone.id FROM gone)
     ORDER BY held.id
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM lg), e.ids, e.whys, e.channels, e.events
    INTO n, v_emails, v_whys, v_channels, v_events
    FROM (SELECT pg_catalog.array_agg(gone.payload::bigint ORDER BY gone.id) AS ids,
                 pg_catalog.array_agg(held.why ORDER BY gone.id) AS whys,
                 pg_catalog.array_agg(gone.channel ORDER BY gone.id) AS channels,
                 pg_catalog.array_agg(held.origin_id ORDER BY gone.id) AS events
            FROM gone
            JOIN held ON held.id = gone.id
            JOIN pgrelay.channels c ON c.channel = gone.channel AND c.kind = 'email'
           WHERE gone.payload ~ '^[0-9]{1,18}$') e;
  -- Only a notification this event may send: not one another event holds,
  -- nor another channel's (fail_for_event, the send gate's rule).
  FOR i IN 1 .. COALESCE(pg_catalog.cardinality(v_emails), 0) LOOP
    PERFORM pgrelay_notifier.fail_for_event(v_emails[i], v_channels[i], v_events[i],
      'gave up: ' || v_whys[i] || ' (its last attempt)');
  END LOOP;
  RETURN n;
END
$$;

-- decommission: node p_node is gone for good. Refuses a node that
-- heartbeated within p_dead_after (PR022), and a p_dead_after that is NULL,
-- zero or negative (PR023: with it every node would count as silent long
-- enough, and a live node's pinned rows would be discarded while its
-- Processors ran). Then, in one transaction:
-- * its pinned rows (node-restricted channels), pending or held by its dead
--   Processors, can never run anywhere else: they are discarded, each logged
--   'gave_up' with the reason and kept as a dead letter (an email's
--   notification ends 'failed', as in _rescue);
-- * its unrestricted rows go to the live node that adopts (the live node with
--   the smallest id, as _adopt picks it), logged 'adopted'; with no live node
--   yet, the first one to adopt takes them;
-- * its processor rows are removed, and its node row stays as a tombstone
--   (decommissioned_at), so that rows of the node that arrive later through
--   replication are adopted too.
-- Returns the number of pinned rows discarded. Run on any node: the changes
-- replicate.
CREATE OR REPLACE FUNCTION pgrelay.decommission(p_node int, p_dead_after interval DEFAULT '1 minute')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_seen timestamptz;
  v_adopter int;
  v_procs bigint[];
  v_why text := pg_catalog.format('node %s was decommissioned', p_node);
  v_emails bigint[];
  v_errors text[];
  n bigint;
  v_channels text[];
  v_events bigint[];
BEGIN
  IF p_node IS NULL OR p_node < 0 OR p_node > 1023 THEN
    RAISE EXCEPTION 'pgrelay.decommission: node id % is outside 0..1023', p_node USING ERRCODE = 'PR020';
  END IF;
  IF p_dead_after IS NULL OR p_dead_after <= interval '0' THEN
    RAISE EXCEPTION 'pgrelay.decommission: p_dead_after must be positive, got %',
      COALESCE(p_dead_after::text, 'NULL') USING ERRCODE = 'PR023',
      HINT = 'It is how long the node must have been silent; with zero or less a live node would count as dead.';
  END IF;
  SELECT x.last_seen INTO v_seen FROM pgrelay.nodes x
   WHERE x.node_id = p_node AND x.decommissioned_at IS NULL;
  IF v_seen >= now() - p_dead_after THEN
    RAISE EXCEPTION 'pgrelay.decommission: node % heartbeated % ago; stop its Processors first',
      p_node, now() - v_seen USING ERRCODE = 'PR022',
      HINT = 'A node is decommissioned only once it has been silent for p_dead_after.';
  END IF;
  WITH d AS (
    DELETE FROM pgrelay.queue q
     WHERE q.run_in_node = p_node
    RETURNING q.id, q.origin_id, q.channel, q.attempt, q.payload, q.run_in_node,
              pg_catalog.format('%s: a row pinned to it can never run%s', v_why,
                                CASE WHEN q.dispatched_at IS NOT NULL
                                     THEN pg_catalog.format(' (its processor %s held attempt %s)',
                                                            q.dispatched_by, q.attempt)
                                     ELSE '' END) AS why
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error)
    SELECT d.id, d.origin_id, d.channel, d.attempt, 'gave_up', d.why
      FROM d ORDER BY d.id
    RETURNING 1
  ), dl AS (
    INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, last_error, outcome,
                                      ended_at, node, run_in_node, notification_id)
    SELECT d.id, d.origin_id, d.channel, d.payload, d.attempt, d.why, 'gave_up',
           pg_catalog.clock_timestamp(), pgrelay._this_node(), d.run_in_node,
           pgrelay._notification_of(c.kind, d.payload)
      FROM d
      LEFT JOIN pgrelay.channels c ON c.channel = d.channel
     ORDER BY d.id
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM lg), e.ids, e.errors, e.channels, e.events
    INTO n, v_emails, v_errors, v_channels, v_events
    FROM (SELECT pg_catalog.array_agg(d.payload::bigint ORDER BY d.id) AS ids,
                 pg_catalog.array_agg(d.why ORDER BY d.id) AS errors,
                 pg_catalog.array_agg(d.channel ORDER BY d.id) AS channels,
                 pg_catalog.array_agg(d.origin_id ORDER BY d.id) AS events
            FROM d
            JOIN pgrelay.channels c ON c.channel = d.channel AND c.kind = 'email'
           WHERE d.payload ~ '^[0-9]{1,18}$') e;
  -- A discarded email event never reaches the email handler: its
  -- notification ends 'failed' here, if this event may send it (not one
  -- another event holds or sent, nor another channel's: fail_for_event).
  FOR i IN 1 .. COALESCE(pg_catalog.cardinality(v_emails), 0) LOOP
    PERFORM pgrelay_notifier.fail_for_event(v_emails[i], v_channels[i], v_events[i], 'gave up: ' || v_errors[i]);
  END LOOP;

  SELECT min(x.node_id) INTO v_adopter FROM pgrelay.nodes x
   WHERE x.node_id >= 0 AND x.node_id <> p_node AND x.last_seen >= now() - p_dead_after
     AND x.mode <> 'single' AND x.decommissioned_at IS NULL;
  IF v_adopter IS NOT NULL THEN
    SELECT COALESCE(pg_catalog.array_agg(p.processor_id), '{}') INTO v_procs
      FROM pgrelay.processors p WHERE p.node_id = p_node;
    PERFORM pgrelay._adopt_rows(p_node, v_adopter, v_procs, v_why);
  END IF;
  DELETE FROM pgrelay.processors p WHERE p.node_id = p_node;
  -- The tombstone. A node that never heartbeated gets one too: rows
  -- enqueued there are adopted all the same.
  INSERT INTO pgrelay.nodes AS x (node_id, mode, decommissioned_at, adopted_at)
  VALUES (p_node, 'decommissioned', now(), CASE WHEN v_adopter IS NOT NULL THEN now() END)
  ON CONFLICT (node_id) DO UPDATE
    SET decommissioned_at = now(),
        adopted_at = CASE WHEN v_adopter IS NOT NULL THEN now() ELSE x.adopted_at END;
  RETURN n;
END
$$;

-- ---------------------------------------------------------------------------
-- The notifier: a retried email goes back to 'queued'
-- ---------------------------------------------------------------------------

-- requeue: notification p_notification_id of channel p_channel goes from
-- 'failed' back to 'queued', for the retry of its dead event: the one move
-- back the notifier allows, made only here and only by pgrelay.retry()
-- (through its owner; no role is granted it). The gate is reset
-- (sending_event, send_in_doubt): the retried event may send it, even where
-- an earlier attempt may have handed it to the SMTP server (an admin's
-- retry asks for exactly that). The change is appended to status_events and
-- p_reason to debug_log, as every other transition. A notification that is
-- not 'failed' (queued, sending, sent, cancelled) or of another channel is
-- left as it is: the retried event's gate decides for it as for any event.
-- Returns whether the status changed. SECURITY INVOKER: its only caller,
-- pgrelay.retry(), runs as the schema's owner, who owns the notifier's
-- tables.
CREATE FUNCTION pgrelay_notifier.requeue(p_notification_id bigint, p_channel text, p_reason text)
RETURNS bool
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  UPDATE pgrelay_notifier.notifications n
     SET status = 'queued', sending_event = NULL, send_in_doubt = false,
         updated_at = pg_catalog.clock_timestamp()
   WHERE n.notification_id = p_notification_id AND n.channel = p_channel AND n.status = 'failed';
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pgrelay_notifier._event(ARRAY[p_notification_id], ARRAY[p_channel], 'queued', NULL);
  PERFORM pgrelay_notifier.debug_log(p_notification_id, p_reason);
  RETURN true;
END
$$;

GRANT CREATE ON SCHEMA pgrelay_notifier TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.requeue(bigint, text, text) OWNER TO pgrelay_notifier;
REVOKE CREATE ON SCHEMA pgrelay_notifier FROM pgrelay_notifier;
REVOKE ALL ON FUNCTION pgrelay_notifier.requeue(bigint, text, text) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- The admin API: retry, retry_all, discard
-- ---------------------------------------------------------------------------

-- _retry_dead: enqueues dead letter dl (already deleted by the caller) again
-- and returns the new queue id: the same channel and payload, a fresh
-- attempt chain (attempt 1, due now, the channel's expire_after counted from
-- now), and the SAME origin_id, with retry_of naming the attempt that ended:
-- status(origin_id) follows the retry, and the log tells the notification's
-- whole story under one id. The row is pinned to the node the dead event was
-- pinned to when its channel is node-restricted (to this node when it was
-- not pinned then), and not pinned otherwise; a pin to a decommissioned node
-- is refused (PR051): it could never run. An unregistered channel: PR001.
-- Writes the 'retried' log row (on the new queue row), and an email's
-- notification goes back to 'queued' (pgrelay_notifier.requeue). The row is
-- inserted stamped, as _enqueue does (the trigger would pin it here); it
-- takes the producer's lock on its channel first, as notify() does.
CREATE FUNCTION pgrelay._retry_dead(dl pgrelay.dead_letters) RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
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
                             enqueued_at, not_before, expires_at, lane, phash)
  VALUES (v_id, dl.origin_id, dl.channel, dl.payload, COALESCE(v_pin, v_node), v_pin, 1, dl.id,
          now(), now(), pgrelay._expiry_of(ch.expire_after, now(), now()),
          pgrelay._lane_of(ch.concurrency_mode, dl.payload), pgrelay._phash_of(ch.deduplicate, dl.payload));
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'off', true);
  PERFORM pgrelay._wake(ch.channel);
  IF ch.publish_payload THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload) VALUES (v_id, dl.payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node)
  VALUES (v_id, dl.origin_id, dl.channel, 1, 'retried',
          pg_catalog.format('retried by %s: dead letter %s (%s after %s attempts) enqueued again as %s',
                            session_user, dl.id, dl.outcome, dl.attempts, v_id),
          v_node);
  IF ch.kind = 'email' AND dl.notification_id IS NOT NULL THEN
    PERFORM pgrelay_notifier.requeue(dl.notification_id, dl.channel,
      pg_catalog.format('queued again: dead letter %s of event %s was retried by %s', dl.id, dl.origin_id,
                        session_user));
  END IF;
  RETURN v_id;
END
$$;

-- _take_dead_letter: removes dead letter p_id and returns it, for p_caller
-- (retry, discard). An id that is not a dead letter (never was, or was
-- retried, discarded or trimmed already): PR050. Two calls for one id: the
-- second waits for the first and then raises PR050.
CREATE FUNCTION pgrelay._take_dead_letter(p_id bigint, p_caller text) RETURNS pgrelay.dead_letters
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  dl pgrelay.dead_letters;
BEGIN
  DELETE FROM pgrelay.dead_letters d WHERE d.id = p_id RETURNING * INTO dl;
  IF NOT FOUND THEN
    RAISE EXCEPTION '%: % is not a dead letter', p_caller, COALESCE(p_id::text, 'NULL')
      USING ERRCODE = 'PR050',
      HINT = 'pgrelay dead list shows the dead letters; one retried, discarded or past the retention is gone.';
  END IF;
  RETURN dl;
END
$$;

-- retry: removes dead letter p_id (_take_dead_letter: PR050 when it is
-- none) and enqueues it again (_retry_dead); returns the new queue id.
CREATE FUNCTION pgrelay.retry(p_id bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN pgrelay._retry_dead(pgrelay._take_dead_letter(p_id, 'pgrelay.retry'));
END
$$;

-- retry_all: retry() of every dead letter of p_channel that ended at or
-- after p_since (NULL: all of them), oldest first; returns how many. Dead
-- letters another transaction is retrying or discarding meanwhile are left
-- to it. A NULL channel: PR001.
CREATE FUNCTION pgrelay.retry_all(p_channel text, p_since timestamptz DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  dl pgrelay.dead_letters;
  n bigint := 0;
BEGIN
  IF p_channel IS NULL THEN
    RAISE EXCEPTION 'pgrelay.retry_all: channel must not be NULL' USING ERRCODE = 'PR001';
  END IF;
  FOR dl IN
    WITH x AS (
      DELETE FROM pgrelay.dead_letters d
       WHERE d.id IN (SELECT y.id FROM pgrelay.dead_letters y
                       WHERE y.channel = p_channel AND (p_since IS NULL OR y.ended_at >= p_since)
                       ORDER BY y.ended_at, y.id
                         FOR UPDATE SKIP LOCKED)
      RETURNING d.*
    )
    SELECT * FROM x ORDER BY x.ended_at, x.id
  LOOP
    PERFORM pgrelay._retry_dead(dl);
    n := n + 1;
  END LOOP;
  RETURN n;
END
$$;

-- discard: removes dead letter p_id for good and writes a 'discarded' log
-- row (on the queue row that ended); returns true. An email's notification
-- stays as it is (failed). An id that is not a dead letter: PR050.
CREATE FUNCTION pgrelay.discard(p_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  dl pgrelay.dead_letters := pgrelay._take_dead_letter(p_id, 'pgrelay.discard');
BEGIN
  INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error)
  VALUES (dl.id, dl.origin_id, dl.channel, dl.attempts, 'discarded',
          pg_catalog.format('discarded by %s: dead letter %s (%s after %s attempts)',
                            session_user, dl.id, dl.outcome, dl.attempts));
  RETURN true;
END
$$;

-- _trim_dead_letters: the janitor's retention: deletes up to p_batch dead
-- letters that ended more than p_older_than ago, oldest first (by
-- dead_letters_ended). Returns how many.
CREATE FUNCTION pgrelay._trim_dead_letters(p_older_than interval, p_batch int) RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n int;
BEGIN
  DELETE FROM pgrelay.dead_letters d
   WHERE d.id = ANY (ARRAY(SELECT x.id FROM pgrelay.dead_letters x
                            WHERE x.ended_at < now() - p_older_than
                            ORDER BY x.ended_at LIMIT p_batch));
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

-- ---------------------------------------------------------------------------
-- Privileges
-- ---------------------------------------------------------------------------

REVOKE ALL ON pgrelay.dead_letters FROM PUBLIC;
REVOKE ALL ON FUNCTION pgrelay._notification_of(text, text), pgrelay._retry_dead(pgrelay.dead_letters),
                       pgrelay._take_dead_letter(bigint, text),
                       pgrelay.retry(bigint), pgrelay.retry_all(text, timestamptz), pgrelay.discard(bigint),
                       pgrelay._trim_dead_letters(interval, int)
  FROM PUBLIC;

-- Admins list, retry and discard dead letters.
GRANT SELECT ON pgrelay.dead_letters TO pgrelay_admin;
GRANT EXECUTE ON FUNCTION pgrelay.retry(bigint), pgrelay.retry_all(text, timestamptz), pgrelay.discard(bigint)
  TO pgrelay_admin;

-- Processors write them where events end (_complete and _rescue run as the
-- Processor) and trim them.
GRANT SELECT, INSERT, DELETE ON pgrelay.dead_letters TO pgrelay_processor;
GRANT EXECUTE ON FUNCTION pgrelay._notification_of(text, text), pgrelay._trim_dead_letters(interval, int)
  TO pgrelay_processor;
