-- Cancel and snooze (issue 30, items 4 and 6).
--
-- cancel(p_id) ends an event that has not ended: a pending, delayed or
-- retrying one at once ('cancelled': a log row, a status, a NATS document,
-- no dead letter); a running one finishes its attempt, and a failure then
-- ends 'cancelled' instead of retrying. A cancel is a request
-- (pgrelay.cancels, replicated): the node that runs the event applies it,
-- where it is issued or, once the request has reached it, in its
-- Processors' sweep, so that no node deletes a row another node may hold
-- (docs/multi-master.md).
--
-- A Go handler's Snooze(d) puts its event back for d without spending an
-- attempt (_snooze): the row is released, due after d, its snoozes counted
-- against _max_snoozes(); the log records 'snoozed' with the time it is due.
--
-- The completion's retry row keeps the event's priority (0021), its sender
-- and its snoozes.

-- ---------------------------------------------------------------------------
-- The log's events
-- ---------------------------------------------------------------------------

ALTER TABLE pgrelay.log DROP CONSTRAINT log_event,
  ADD CONSTRAINT log_event CHECK (event IN ('succeeded', 'failed', 'gave_up', 'expired', 'deduplicated', 'adopted',
                                            'rescued', 'retried', 'discarded', 'enqueued', 'cancelled', 'snoozed'))
  NOT VALID;
ALTER TABLE pgrelay.log VALIDATE CONSTRAINT log_event;

-- ---------------------------------------------------------------------------
-- The queue: who enqueued a row, how often it snoozed
-- ---------------------------------------------------------------------------

-- enqueued_by: the enqueuing role, as pgrelay_notifier._caller() names an
-- email's sender (the role set with SET ROLE, else the session's user),
-- written inline: a call per row would cost notify_many() a function call
-- per payload (TestEnqueuedByIsTheCaller ties the two). Rows enqueued
-- before this migration have none: only admins cancel them. A retry keeps
-- it; a retried dead letter is its admin's.
-- snoozes first, a smallint beside priority's: no alignment padding, as
-- the queue's rows are its hot path's pages.
ALTER TABLE pgrelay.queue ADD COLUMN snoozes smallint NOT NULL DEFAULT 0,
  ADD COLUMN enqueued_by text;
ALTER TABLE pgrelay.queue ALTER COLUMN enqueued_by
  SET DEFAULT CASE WHEN pg_catalog.current_setting('role') OPERATOR(pg_catalog.=) 'none' THEN SESSION_USER::text
                   ELSE pg_catalog.current_setting('role') END;

-- The most snoozes an event may take: a handler that snoozes forever must
-- not keep its event alive forever (RetryAfter spends attempts for the same
-- reason). The snooze past it is recorded as a failed attempt.
CREATE FUNCTION pgrelay._max_snoozes() RETURNS int
LANGUAGE sql IMMUTABLE
RETURN 1000;

-- ---------------------------------------------------------------------------
-- Cancel requests
-- ---------------------------------------------------------------------------

-- One row per event being cancelled, replicated to every node: deleted by
-- the node that ends the event cancelled, or, once the event has ended
-- otherwise (a running attempt that succeeded), by the sweep.
CREATE TABLE pgrelay.cancels (
  origin_id    bigint PRIMARY KEY,
  requested_by text NOT NULL,
  requested_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  node         int NOT NULL DEFAULT pgrelay._this_node()
);

COMMENT ON TABLE pgrelay.cancels IS
  'Cancel requests (pgrelay.cancel): applied by the node that runs the event; a running attempt that fails ends cancelled.';

-- Whether this node ends the rows of an event it is asked to cancel: the
-- one that may claim them. A database without other live nodes does; a
-- pinned row's node; else the holder of a live leader lease, or the row's
-- owner. In multi-node mode that is the node that claims it; in leader mode
-- the leader (docs/multi-master.md says what holds when the lease moves).
CREATE FUNCTION pgrelay._cancels_here(p_run_in_node int, p_owner_node int) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE
    WHEN NOT EXISTS (SELECT FROM pgrelay.nodes n
                      WHERE n.node_id >= 0 AND n.node_id <> pgrelay._this_node() AND n.decommissioned_at IS NULL)
      THEN true
    WHEN p_run_in_node IS NOT NULL THEN p_run_in_node = pgrelay._this_node()
    ELSE COALESCE((SELECT l.leader_node FROM pgrelay.nodes l
                    WHERE l.node_id = -1 AND l.lease_until > pg_catalog.now()), p_owner_node) = pgrelay._this_node()
  END
$$;

-- The notifications of email events that ended cancelled are cancelled too
-- (unless sent meanwhile): an email and its event never disagree.
CREATE FUNCTION pgrelay_notifier._cancel_for_events(p_notification_ids bigint[], p_channels text[], p_reason text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_ids bigint[];
  v_channels text[];
BEGIN
  WITH c AS (
    UPDATE pgrelay_notifier.notifications n
       SET status = 'cancelled', updated_at = pg_catalog.clock_timestamp()
      FROM unnest(p_notification_ids, p_channels) AS e(id, channel)
     WHERE n.notification_id = e.id AND n.channel = e.channel AND n.status IN ('queued', 'sending')
    RETURNING n.notification_id, n.channel
  )
  SELECT pg_catalog.array_agg(c.notification_id ORDER BY c.notification_id),
         pg_catalog.array_agg(c.channel ORDER BY c.notification_id)
    INTO v_ids, v_channels FROM c;
  IF v_ids IS NOT NULL THEN
    PERFORM pgrelay_notifier._event(v_ids, v_channels, 'cancelled', p_reason);
  END IF;
END
$$;
-- Owned by pgrelay_notifier, as its other functions (0002 grants the
-- schema's CREATE for the transfer only).
GRANT CREATE ON SCHEMA pgrelay_notifier TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier._cancel_for_events(bigint[], text[], text) OWNER TO pgrelay_notifier;
REVOKE CREATE ON SCHEMA pgrelay_notifier FROM pgrelay_notifier;

-- _cancel_apply: ends the rows of event p_origin that this node runs and no
-- transaction holds (a direct batch's, a claim's are left to finish their
-- attempt), if a request asks for it; returns whether it ended one.
CREATE FUNCTION pgrelay._cancel_apply(p_origin bigint) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  k pgrelay.cancels;
  v_node int := pgrelay._this_node();
  v_reason text;
  v_n int;
  v_mails bigint[];
  v_mail_channels text[];
BEGIN
  SELECT * INTO k FROM pgrelay.cancels c WHERE c.origin_id = p_origin;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  v_reason := pg_catalog.format('cancelled by %s', k.requested_by);
  WITH del AS (
    DELETE FROM pgrelay.queue q
     WHERE q.id IN (SELECT x.id FROM pgrelay.queue x
                     WHERE ((x.id = p_origin AND x.origin_id = p_origin)
                            OR (x.origin_id = p_origin AND x.retry_of IS NOT NULL))
                       AND x.dispatched_at IS NULL
                       AND pgrelay._cancels_here(x.run_in_node, x.owner_node)
                       FOR UPDATE SKIP LOCKED)
       AND q.dispatched_at IS NULL
    RETURNING q.id, q.origin_id, q.channel, q.attempt, q.payload
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node)
    SELECT del.id, del.origin_id, del.channel, del.attempt, 'cancelled', v_reason, v_node
      FROM del ORDER BY del.id
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM lg),
         (SELECT pg_catalog.array_agg(m.n) FROM del JOIN pgrelay.channels c ON c.channel = del.channel,
                 LATERAL (SELECT pgrelay._notification_of(c.kind, del.payload) AS n) m WHERE m.n IS NOT NULL),
         (SELECT pg_catalog.array_agg(del.channel) FROM del JOIN pgrelay.channels c ON c.channel = del.channel
           WHERE pgrelay._notification_of(c.kind, del.payload) IS NOT NULL)
    INTO v_n, v_mails, v_mail_channels;
  IF v_n = 0 THEN
    RETURN false;
  END IF;
  IF v_mails IS NOT NULL THEN
    PERFORM pgrelay_notifier._cancel_for_events(v_mails, v_mail_channels, v_reason);
  END IF;
  DELETE FROM pgrelay.cancels c WHERE c.origin_id = p_origin;
  RETURN true;
END
$$;

-- _cancel_request: records that p_origin is to be cancelled, on behalf of
-- p_by, and applies it here if this node runs it (elsewhere that node's
-- sweep does, once the request has arrived: _cancel_sweep).
CREATE FUNCTION pgrelay._cancel_request(p_origin bigint, p_by text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  INSERT INTO pgrelay.cancels (origin_id, requested_by) VALUES (p_origin, p_by)
  ON CONFLICT (origin_id) DO NOTHING;
  PERFORM pgrelay._cancel_apply(p_origin);
END
$$;

-- cancel: ends event p_id (the id notify() returned) if it has not ended
-- and the caller may: an admin any event, a producer those its role
-- enqueued (as pgrelay_notifier._may_see decides for emails). Returns
-- whether it had not ended: a pending, delayed or retrying event ends
-- 'cancelled' here or, on a cluster, on the node that runs it; a running one
-- finishes its attempt (a success stays 'succeeded', a failure ends
-- 'cancelled'). False for an event that ended, an unknown one, or one that
-- is not the caller's.
CREATE FUNCTION pgrelay.cancel(p_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_by text;
BEGIN
  SELECT q.enqueued_by INTO v_by
    FROM pgrelay.queue q
   WHERE (q.id = p_id AND q.origin_id = p_id) OR (q.origin_id = p_id AND q.retry_of IS NOT NULL)
   ORDER BY q.attempt DESC
   LIMIT 1;
  IF NOT FOUND OR NOT pgrelay_notifier._may_see(v_by) THEN
    RETURN false;
  END IF;
  PERFORM pgrelay._cancel_request(p_id, pgrelay_notifier._caller());
  RETURN true;
END
$$;

-- The event of a notification pgrelay_notifier.cancel() cancelled: its
-- rows are found by channel and payload (the notification's id), the
-- pending ones through queue_ready, the running ones through
-- queue_inflight, so a channel's backlog bounds the search.
CREATE FUNCTION pgrelay._cancel_email_event(p_notification_id bigint, p_channel text, p_by text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_origin bigint;
BEGIN
  FOR v_origin IN
    SELECT DISTINCT q.origin_id FROM pgrelay.queue q
     WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.payload = p_notification_id::text
    UNION
    SELECT q.origin_id FROM pgrelay.queue q
     WHERE q.dispatched_at IS NOT NULL AND q.dispatched_by IS NOT NULL
       AND q.channel = p_channel AND q.payload = p_notification_id::text
  LOOP
    PERFORM pgrelay._cancel_request(v_origin, p_by);
  END LOOP;
END
$$;

-- pgrelay_notifier.cancel: as in 0002, and the notification's event is
-- cancelled with it.
CREATE OR REPLACE FUNCTION pgrelay_notifier.cancel(p_notification_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_channel text;
BEGIN
  UPDATE pgrelay_notifier.notifications n
     SET status = 'cancelled', updated_at = clock_timestamp()
   WHERE n.notification_id = p_notification_id AND n.status = 'queued'
     AND pgrelay_notifier._may_see(n.sent_by)
  RETURNING n.channel INTO v_channel;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pgrelay_notifier._event(ARRAY[p_notification_id], ARRAY[v_channel], 'cancelled', NULL);
  PERFORM pgrelay._cancel_email_event(p_notification_id, v_channel, pgrelay_notifier._caller());
  RETURN true;
END
$$;

-- _cancel_sweep: the Processor's janitor applies the requests this node
-- can apply now: those that arrived from another node (applying them in the
-- replication's own transaction would not replicate the outcome: changes
-- made while applying another node's are not forwarded), and those of
-- events that were running when they came (a claim released or rescued
-- since, a retry a failure enqueued before its completion saw the
-- request). It forgets those older than an hour whose event has no row
-- here any more.
CREATE FUNCTION pgrelay._cancel_sweep() RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_origin bigint;
  n int := 0;
BEGIN
  FOR v_origin IN SELECT c.origin_id FROM pgrelay.cancels c ORDER BY c.origin_id LOOP
    IF pgrelay._cancel_apply(v_origin) THEN
      n := n + 1;
    END IF;
  END LOOP;
  DELETE FROM pgrelay.cancels c
   WHERE c.requested_at < pg_catalog.now() - interval '1 hour'
     AND NOT EXISTS (SELECT FROM pgrelay.queue q
                      WHERE (q.id = c.origin_id AND q.origin_id = c.origin_id)
                         OR (q.origin_id = c.origin_id AND q.retry_of IS NOT NULL));
  RETURN n;
END
$$;

-- ---------------------------------------------------------------------------
-- status() knows cancelled
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pgrelay.status(p_id bigint) RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v text;
BEGIN
  SELECT CASE WHEN q.dispatched_at IS NOT NULL THEN 'in_flight'
              WHEN q.attempt > 1 THEN 'retrying'
              ELSE 'pending' END
    INTO v
    FROM pgrelay.queue q
   WHERE (q.id = p_id AND q.origin_id = p_id)
      OR (q.origin_id = p_id AND q.retry_of IS NOT NULL)
   ORDER BY q.attempt DESC
   LIMIT 1;
  IF FOUND THEN
    RETURN v;
  END IF;
  SELECT l.event INTO v
    FROM pgrelay.log l
   WHERE l.origin_id = p_id AND l.event IN ('succeeded', 'gave_up', 'expired', 'deduplicated', 'cancelled')
   ORDER BY l.id DESC
   LIMIT 1;
  RETURN v;
END
$$;

-- ---------------------------------------------------------------------------
-- The completion
-- ---------------------------------------------------------------------------

-- As in 0020, and: a failure (or a give-up) of an event with a cancel
-- request ends 'cancelled', no retry, no dead letter, its email's
-- notification cancelled; the retry row keeps the event's priority, sender
-- and snoozes. The direct-successes statement is unchanged: a success
-- never reads a request.
CREATE OR REPLACE FUNCTION pgrelay._complete_outcomes(p_processor bigint, p_ids bigint[], p_claimed_at timestamptz[],
                                           p_events text[], p_errors text[],
                                           OUT done int, OUT gave_up bigint[])
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_released int;
  v_done int;
  v_mails bigint[];
  v_mail_channels text[];
BEGIN
  -- A direct batch of successes, nearly every batch: its rows, locked in
  -- the caller's transaction, are deleted and logged; nothing to release,
  -- retry or bury. The general statement below does the same for them.
  IF p_processor IS NULL AND 'succeeded' = ALL (p_events)
     AND (p_errors IS NULL OR pg_catalog.cardinality(pg_catalog.array_remove(p_errors, NULL)) = 0) THEN
    -- Unclaimed rows only, tested as num_nulls() so that the planner cannot
    -- match queue_ready's predicate (dispatched_at IS NULL): a plan made on
    -- a small queue walked that whole index instead of the ids' keys
    -- (TestExplainCompletePlans).
    WITH del AS (
      DELETE FROM pgrelay.queue q
       WHERE q.id = ANY (p_ids) AND pg_catalog.num_nulls(q.dispatched_at) = 1
      RETURNING q.id, q.origin_id, q.channel, q.attempt
    ), ids AS (
      SELECT pgrelay._next_ids((SELECT count(*) FROM del)::int) AS a
    )
    INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node)
    SELECT ids.a[x.rn], x.id, x.origin_id, x.channel, x.attempt, 'succeeded', v_node
      FROM (SELECT del.*, pg_catalog.row_number() OVER (ORDER BY del.id) AS rn FROM del) x, ids
     ORDER BY x.id;
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
    RETURNING q.id, q.origin_id, q.channel, q.attempt, o.event AS o_event, o.error AS o_error,
              CASE WHEN o.event <> 'succeeded' THEN q.payload END AS payload,
              CASE WHEN o.event <> 'succeeded' THEN q.enqueued_at END AS enqueued_at,
              CASE WHEN o.event <> 'succeeded' THEN q.expires_at END AS expires_at,
              CASE WHEN o.event <> 'succeeded' THEN q.run_in_node END AS run_in_node,
              CASE WHEN o.event <> 'succeeded' THEN q.priority END AS priority,
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
    INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, error, node)
    SELECT ids.a[x.rn], x.id, x.origin_id, x.channel, x.attempt, x.final,
           CASE WHEN x.o_error IS NULL THEN NULL ELSE pg_catalog.left(x.o_error, 8000) END, v_node
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
                                      ended_at, node, run_in_node, notification_id)
    SELECT d.id, d.origin_id, d.channel, d.payload, d.attempt,
           CASE WHEN d.o_error IS NULL THEN NULL ELSE pg_catalog.left(d.o_error, 8000) END, d.final,
           pg_catalog.clock_timestamp(), v_node, d.run_in_node, pgrelay._notification_of(c.kind, d.payload)
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

-- ---------------------------------------------------------------------------
-- Snooze
-- ---------------------------------------------------------------------------

-- _snooze: the outcomes of attempts whose handler snoozed (Go's Snooze(d)):
-- each row of processor p_processor's claim (NULL: a direct batch's, locked
-- in the caller's transaction) goes back, due after its p_delays, with no
-- attempt spent; the log records 'snoozed', its error naming when it is
-- due. A row at _max_snoozes(), or whose event is being cancelled, is
-- recorded as a failed attempt instead (_complete_outcomes: the latter ends
-- cancelled). done and gave_up as _complete_outcomes returns them.
CREATE FUNCTION pgrelay._snooze(p_processor bigint, p_ids bigint[], p_claimed_at timestamptz[], p_delays interval[],
                                OUT done int, OUT gave_up bigint[])
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_ids bigint[];
  v_at timestamptz[];
  r record;
BEGIN
  WITH o AS (
    SELECT * FROM unnest(p_ids, p_claimed_at, p_delays) AS o(id, claimed_at, delay)
  ), up AS (
    UPDATE pgrelay.queue q
       SET dispatched_at = NULL, dispatched_by = NULL, snoozes = q.snoozes + 1,
           not_before = pg_catalog.clock_timestamp() + GREATEST(COALESCE(o.delay, interval '0'), interval '0')
      FROM o
     WHERE q.id = o.id
       AND CASE WHEN p_processor IS NULL THEN q.dispatched_at IS NULL
                ELSE q.dispatched_by = p_processor AND q.dispatched_at = o.claimed_at END
       AND q.snoozes < pgrelay._max_snoozes()
       AND NOT EXISTS (SELECT FROM pgrelay.cancels k WHERE k.origin_id = q.origin_id)
    RETURNING q.id, q.origin_id, q.channel, q.attempt, q.not_before
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node)
    SELECT up.id, up.origin_id, up.channel, up.attempt, 'snoozed',
           'snoozed until ' || pg_catalog.to_char(up.not_before AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           v_node
      FROM up ORDER BY up.id
    RETURNING queue_id
  )
  SELECT (SELECT count(*) FROM lg),
         (SELECT pg_catalog.array_agg(o.id ORDER BY o.id) FROM o WHERE o.id NOT IN (SELECT lg.queue_id FROM lg)),
         (SELECT pg_catalog.array_agg(o.claimed_at ORDER BY o.id) FROM o WHERE o.id NOT IN (SELECT lg.queue_id FROM lg))
    INTO done, v_ids, v_at;
  gave_up := '{}';
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  -- The rest: those past the bound or being cancelled fail their attempt
  -- (a row no longer held is not recorded there either).
  SELECT * INTO r
    FROM pgrelay._complete_outcomes(p_processor, v_ids, v_at,
           pg_catalog.array_fill('failed'::text, ARRAY[pg_catalog.cardinality(v_ids)]),
           pg_catalog.array_fill(pg_catalog.format('snoozed %s times, the most an event may', pgrelay._max_snoozes()),
                                 ARRAY[pg_catalog.cardinality(v_ids)]));
  done := done + r.done;
  gave_up := r.gave_up;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._max_snoozes(), pgrelay._cancels_here(int, int), pgrelay._cancel_apply(bigint),
  pgrelay._cancel_request(bigint, text), pgrelay.cancel(bigint),
  pgrelay._cancel_email_event(bigint, text, text), pgrelay._cancel_sweep(),
  pgrelay._snooze(bigint, bigint[], timestamptz[], interval[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgrelay_notifier._cancel_for_events(bigint[], text[], text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION pgrelay.cancel(bigint) TO pgrelay_producer, pgrelay_admin;
GRANT EXECUTE ON FUNCTION pgrelay._cancel_email_event(bigint, text, text) TO pgrelay_notifier;
GRANT EXECUTE ON FUNCTION pgrelay._max_snoozes(), pgrelay._cancels_here(int, int), pgrelay._cancel_apply(bigint),
  pgrelay._snooze(bigint, bigint[], timestamptz[], interval[]), pgrelay._cancel_sweep()
  TO pgrelay_processor;
GRANT EXECUTE ON FUNCTION pgrelay_notifier._cancel_for_events(bigint[], text[], text) TO pgrelay_processor, CURRENT_USER;
GRANT SELECT, DELETE ON pgrelay.cancels TO pgrelay_processor;
GRANT SELECT ON pgrelay.cancels TO pgrelay_viewer;
