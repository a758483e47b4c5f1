-- _complete_outcomes: records a batch's outcomes (p_events[i] of p_ids[i]:
-- 'succeeded', 'failed', 'gave_up', 'expired' or 'release') and returns how
-- many it applied (done) and the ids that gave up (gave_up). A row claimed by
-- p_processor at p_claimed_at[i] (or, with p_processor NULL, an unclaimed row
-- of a direct batch, locked in the caller's transaction) is deleted and its
-- outcome logged; a 'release' puts a claimed row back to pending, same
-- attempt. A failure is retried in a new row (attempt + 1, after _backoff)
-- that keeps the event's priority, sender and snoozes, or, at the channel's
-- last attempt, ends 'gave_up'. A failure or a give-up of an event with a
-- cancel request ends 'cancelled' instead: no retry, no dead letter, the
-- request deleted and its email's notification cancelled. A give-up or an
-- expiry becomes a dead letter. Every log row and dead letter carries the
-- event's priority, NULL for 0. A batch of successes alone (nearly every
-- direct batch, most claimed batches, every _succeed) takes a statement of
-- its own that only deletes and logs: a success never reads a request.
--
-- Planned once per session (plan_cache_mode, TestCompletionPlannedOnce):
-- PostgreSQL's plan cache would make a custom plan of the general statement
-- at every call, with the call's values, once a Processor has events in
-- flight: about 3 ms of planning to complete one claimed event, against
-- 0.4 ms to run it. The generic plans are the ones TestExplainCompletePlans
-- checks.

CREATE OR REPLACE FUNCTION pgrelay._complete_outcomes(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[], OUT done integer, OUT gave_up bigint[]) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_released int;
  v_done int;
  v_mails bigint[];
  v_mail_channels text[];
BEGIN
  -- Successes alone, nearly every batch: their rows are deleted and logged;
  -- nothing to release, retry or bury. The general statement below does the
  -- same for them, at about 200 µs more a call to start and run (a
  -- transaction per event's _succeed paid that for each event). The guards
  -- are tested as num_nulls() and IS TRUE so that the planner cannot match
  -- them to queue_ready's predicate (dispatched_at IS NULL) or to
  -- queue_inflight: plans made on a small queue walked that whole index
  -- instead of the ids' keys, and a claimed success's walked every claim of
  -- the processor, rescanning the ids for each (TestExplainCompletePlans,
  -- TestClaimedSuccessOnlyDeletesAndLogs). Two statements, not one with two
  -- deletes: a direct batch's rows then passed through one more tuplestore.
  IF 'succeeded' = ALL (p_events)
     AND (p_errors IS NULL OR pg_catalog.cardinality(pg_catalog.array_remove(p_errors, NULL)) = 0) THEN
    IF p_processor IS NULL THEN
      -- A direct batch's rows: unclaimed, locked in the caller's transaction.
      WITH del AS (
        DELETE FROM pgrelay.queue q
         WHERE q.id = ANY (p_ids) AND pg_catalog.num_nulls(q.dispatched_at) = 1
        RETURNING q.id, q.origin_id, q.channel, q.attempt, q.priority
      ), ids AS (
        SELECT pgrelay._next_ids((SELECT count(*) FROM del)::int) AS a
      )
      INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, priority)
      SELECT ids.a[x.rn], x.id, x.origin_id, x.channel, x.attempt, 'succeeded', v_node,
             NULLIF(x.priority, 0)
        FROM (SELECT del.*, pg_catalog.row_number() OVER (ORDER BY del.id) AS rn FROM del) x, ids
       ORDER BY x.id;
    ELSE
      -- Claimed rows: each still p_processor's claim of p_claimed_at[i].
      WITH del AS (
        DELETE FROM pgrelay.queue q
         USING ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_claimed_at)) AS o(id, claimed_at)
         WHERE q.id = o.id AND (q.dispatched_by = p_processor AND q.dispatched_at = o.claimed_at) IS TRUE
        RETURNING q.id, q.origin_id, q.channel, q.attempt, q.priority
      ), ids AS (
        SELECT pgrelay._next_ids((SELECT count(*) FROM del)::int) AS a
      )
      INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, priority)
      SELECT ids.a[x.rn], x.id, x.origin_id, x.channel, x.attempt, 'succeeded', v_node,
             NULLIF(x.priority, 0)
        FROM (SELECT del.*, pg_catalog.row_number() OVER (ORDER BY del.id) AS rn FROM del) x, ids
       ORDER BY x.id;
    END IF;
    GET DIAGNOSTICS done = ROW_COUNT;
    gave_up := '{}';
    RETURN;
  END IF;

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
    -- What a retry or a dead letter takes from the row, only for an
    -- outcome that can make one.
    RETURNING q.id, q.origin_id, q.channel, q.attempt, q.priority, o.event AS o_event, o.error AS o_error,
              CASE WHEN o.event <> 'succeeded' THEN q.payload END AS payload,
              CASE WHEN o.event <> 'succeeded' THEN q.enqueued_at END AS enqueued_at,
              CASE WHEN o.event <> 'succeeded' THEN q.expires_at END AS expires_at,
              CASE WHEN o.event <> 'succeeded' THEN q.run_in_node END AS run_in_node,
              CASE WHEN o.event <> 'succeeded' THEN q.enqueued_by END AS enqueued_by,
              CASE WHEN o.event <> 'succeeded' THEN q.snoozes END AS snoozes
  ), d AS (
    -- The channel's attempts, read for a failure only; a cancel request,
    -- for a failure or a give-up only.
    SELECT del.*,
           CASE WHEN del.o_event IN ('failed', 'gave_up')
                 AND EXISTS (SELECT FROM pgrelay.cancels k WHERE k.origin_id = del.origin_id)
                THEN 'cancelled'
                WHEN del.o_event = 'failed'
                 AND del.attempt >= COALESCE((SELECT c.max_attempts FROM pgrelay.channels c
                                               WHERE c.channel = del.channel), 0)
                THEN 'gave_up' ELSE del.o_event END AS final
      FROM del
  ), ids AS (
    SELECT pgrelay._next_ids((SELECT count(*) FROM d)::int) AS a
  ), lg AS (
    INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, error, node, priority)
    SELECT ids.a[x.rn], x.id, x.origin_id, x.channel, x.attempt, x.final,
           CASE WHEN x.o_error IS NULL THEN NULL ELSE pg_catalog.left(x.o_error, 8000) END, v_node,
           NULLIF(x.priority, 0)
      FROM (SELECT d.*, pg_catalog.row_number() OVER (ORDER BY d.id) AS rn FROM d) x, ids
     ORDER BY x.id
    RETURNING 1
  ), rt AS (
    INSERT INTO pgrelay.queue (origin_id, channel, payload, attempt, retry_of, enqueued_at,
                               not_before, expires_at, priority, enqueued_by, snoozes)
    SELECT d.origin_id, d.channel, d.payload, d.attempt + 1, d.id, d.enqueued_at,
           now() + pgrelay._backoff(c.retry_delay, d.attempt), d.expires_at, d.priority, d.enqueued_by, d.snoozes
      FROM d JOIN pgrelay.channels c ON c.channel = d.channel
     WHERE d.final = 'failed' AND c.retry_delay IS NOT NULL
     ORDER BY d.id
    RETURNING 1
  ), dl AS (
    INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, last_error, outcome,
                                      ended_at, node, run_in_node, notification_id, priority)
    SELECT d.id, d.origin_id, d.channel, d.payload, d.attempt,
           CASE WHEN d.o_error IS NULL THEN NULL ELSE pg_catalog.left(d.o_error, 8000) END, d.final,
           pg_catalog.clock_timestamp(), v_node, d.run_in_node, pgrelay._notification_of(c.kind, d.payload),
           NULLIF(d.priority, 0)
      FROM d LEFT JOIN pgrelay.channels c ON c.channel = d.channel
     WHERE d.final IN ('gave_up', 'expired')
     ORDER BY d.id
    RETURNING 1
  ), kc AS (
    -- The requests of the events that ended cancelled.
    DELETE FROM pgrelay.cancels k
     WHERE k.origin_id IN (SELECT d.origin_id FROM d WHERE d.final = 'cancelled')
    RETURNING 1
  ), mails AS (
    SELECT m.n, d.channel
      FROM d JOIN pgrelay.channels c ON c.channel = d.channel,
           LATERAL (SELECT pgrelay._notification_of(c.kind, d.payload) AS n) m
     WHERE d.final = 'cancelled' AND m.n IS NOT NULL
  )
  SELECT (SELECT count(*) FROM lg),
         COALESCE((SELECT pg_catalog.array_agg(d.id ORDER BY d.id) FROM d WHERE d.final = 'gave_up'), '{}'),
         (SELECT pg_catalog.array_agg(mails.n) FROM mails),
         (SELECT pg_catalog.array_agg(mails.channel) FROM mails)
    INTO v_done, gave_up, v_mails, v_mail_channels;

  IF v_mails IS NOT NULL THEN
    PERFORM pgrelay_notifier._cancel_for_events(v_mails, v_mail_channels, 'cancelled: its event was cancelled');
  END IF;
  done := v_released + v_done;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._complete_outcomes(bigint, bigint[], timestamp with time zone[], text[], text[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._complete_outcomes(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[], OUT done integer, OUT gave_up bigint[]) TO pgrelay_processor;
