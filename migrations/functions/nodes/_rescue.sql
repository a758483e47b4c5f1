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
--
-- Planned once per session (plan_cache_mode, TestRescuePlannedOnce): it runs
-- once a heartbeat, on the background connections in turn, so the plan
-- cache's five custom plans per connection came at every call, about 3.6 ms
-- of planning each against under 1 ms to run.

CREATE OR REPLACE FUNCTION pgrelay._rescue(p_processor bigint, p_dead_after interval, p_lease_grace interval) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $_$
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
    SELECT q.id, q.origin_id, q.channel, q.attempt, q.priority, COALESCE(c.max_attempts, 0) AS max_attempts,
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
                                      ended_at, node, run_in_node, notification_id, priority)
    SELECT gone.id, held.origin_id, gone.channel, gone.payload, held.attempt,
           held.why || ' (its last attempt)', 'gave_up', pg_catalog.clock_timestamp(), v_node,
           gone.run_in_node, pgrelay._notification_of(c.kind, gone.payload), NULLIF(held.priority, 0)
      FROM gone
      JOIN held ON held.id = gone.id
      LEFT JOIN pgrelay.channels c ON c.channel = gone.channel
     ORDER BY gone.id
    RETURNING 1
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node, priority)
    SELECT held.id, held.origin_id, held.channel, held.attempt,
           CASE WHEN held.attempt < held.max_attempts THEN 'rescued' ELSE 'gave_up' END,
           CASE WHEN held.attempt < held.max_attempts THEN held.why
                ELSE held.why || ' (its last attempt)' END,
           v_node, NULLIF(held.priority, 0)
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
$_$;

REVOKE ALL ON FUNCTION pgrelay._rescue(bigint, interval, interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._rescue(p_processor bigint, p_dead_after interval, p_lease_grace interval) TO pgrelay_processor;
