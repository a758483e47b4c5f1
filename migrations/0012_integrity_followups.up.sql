-- 0012: follow-ups of 0009-0011.
--
-- A rescue or a decommission that gives up an email event fails its
-- notification only if that event may send it (0009's send gate): through
-- pgrelay_notifier.fail_for_event, as the email handler does, never a
-- notification another event holds or sent, nor another channel's. The
-- functions are 0011's but for the arrays that carry each event's channel and
-- origin id to that call.

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
    RETURNING q.id, q.channel, q.payload
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
    RETURNING q.id, q.origin_id, q.channel, q.attempt, q.payload,
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
-- A pause stops dispatch only
-- ---------------------------------------------------------------------------

-- notify() and notify_many() accept events of a paused channel: pausing a
-- channel must never roll back the application's own transactions. The events
-- wait, pending (the claims pass over paused channels), until update()
-- resumes the channel. As in 0010 but for the PR002 refusal.
CREATE OR REPLACE FUNCTION pgrelay._check_notify(p_channel text) RETURNS pgrelay.channels
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels;
BEGIN
  IF p_channel IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify: channel must not be NULL' USING ERRCODE = 'PR001';
  END IF;
  PERFORM pgrelay._lock_channel(p_channel);
  SELECT * INTO ch FROM pgrelay.channels c WHERE c.channel = p_channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay.notify: unknown channel %', pg_catalog.quote_literal(p_channel)
      USING ERRCODE = 'PR001', HINT = 'Register it first with pgrelay.register().';
  END IF;
  RETURN ch;
END
$$;

-- ---------------------------------------------------------------------------
-- At most once, across crashes: a send in doubt is not repeated
-- ---------------------------------------------------------------------------

-- 0009's gate lets the event that won a notification send it again on a
-- later attempt. When the earlier attempt's outcome is unknown — the
-- Processor died, or the database went away, between handing the message
-- to the SMTP server and recording 'sent'; or the server's reply to the end
-- of DATA never came — sending again could deliver it twice. So the gate
-- marks the notification in doubt when it lets an attempt send, the handler
-- clears the mark (not_sent) when the attempt certainly handed nothing over
-- (a refusal, an error before the end of DATA), and a later attempt of the
-- same event that finds it still in doubt does not send: verdict 'in_doubt',
-- and the handler fails the notification with the reason.
ALTER TABLE pgrelay_notifier.notifications ADD COLUMN send_in_doubt bool NOT NULL DEFAULT false;
COMMENT ON COLUMN pgrelay_notifier.notifications.send_in_doubt IS
  'true from the moment an attempt may hand the message to the SMTP server until its outcome is recorded';

CREATE OR REPLACE FUNCTION pgrelay_notifier.start_sending(p_notification_id bigint, p_channel text, p_event bigint)
RETURNS TABLE (verdict text, reason text, notification_id bigint, channel text, from_addr text,
               to_addrs text[], cc_addrs text[], bcc_addrs text[], subject text, body_text text,
               body_html text, headers jsonb, status text, attempts int, created_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_channel text;
  v_status text;
  v_holder bigint;
  v_doubt bool;
  v_error text;
  v_by text;
  v_verdict text;
  v_reason text;
BEGIN
  SELECT n.channel, n.status, n.sending_event, n.send_in_doubt, n.last_error
    INTO v_channel, v_status, v_holder, v_doubt, v_error
    FROM pgrelay_notifier.notifications n
   WHERE n.notification_id = p_notification_id
     FOR UPDATE;
  v_by := CASE WHEN v_holder IS NULL THEN '' ELSE pg_catalog.format(' by event %s', v_holder) END;
  IF v_channel IS NULL THEN  -- no row (channel is NOT NULL)
    v_verdict := 'missing';
    v_reason := pg_catalog.format('notification %s does not exist on node %s (not replicated to this node yet, or deleted)',
                                  p_notification_id, pgrelay._this_node());
  ELSIF v_channel IS DISTINCT FROM p_channel THEN
    v_verdict := 'refused';
    v_reason := pg_catalog.format('notification %s was created for channel %s, not %s: an event only sends its own channel''s notifications',
                                  p_notification_id, pg_catalog.quote_literal(v_channel),
                                  COALESCE(pg_catalog.quote_literal(p_channel), 'NULL'));
  ELSIF v_status = 'sending' AND v_holder = p_event AND v_doubt THEN
    v_verdict := 'in_doubt';
    v_reason := pg_catalog.format('an earlier attempt of event %s may have handed notification %s to the SMTP server '
                                  '(it stopped, or lost the database, before the outcome was recorded): not sent again, '
                                  'so that it is never delivered twice; it may have been delivered',
                                  p_event, p_notification_id);
  ELSIF v_status = 'queued' OR (v_status = 'sending' AND (v_holder = p_event OR v_holder IS NULL)) THEN
    -- In doubt from here until the handler records the outcome: sent, or
    -- certainly not handed over (not_sent).
    UPDATE pgrelay_notifier.notifications n SET sending_event = p_event, send_in_doubt = true
     WHERE n.notification_id = p_notification_id;
    PERFORM pgrelay_notifier.set_status(p_notification_id, 'sending');
    RETURN QUERY SELECT 'send'::text, NULL::text, f.* FROM pgrelay_notifier.fetch(p_notification_id) f;
    RETURN;
  ELSIF v_status = 'cancelled' THEN
    v_verdict := 'cancelled';
    v_reason := pg_catalog.format('notification %s was cancelled', p_notification_id);
  ELSIF v_status = 'sent' AND v_holder = p_event THEN
    v_verdict := 'sent';
    v_reason := pg_catalog.format('notification %s was already sent by this event', p_notification_id);
  ELSIF v_status = 'sending' THEN
    v_verdict := 'refused';
    v_reason := pg_catalog.format('notification %s is already being sent%s; one send() is delivered at most once',
                                  p_notification_id, v_by);
  ELSIF v_status = 'sent' THEN
    v_verdict := 'refused';
    v_reason := pg_catalog.format('notification %s was already sent%s; one send() is delivered at most once',
                                  p_notification_id, v_by);
  ELSE
    v_verdict := 'refused';
    v_reason := pg_catalog.format('notification %s already failed%s: %s', p_notification_id, v_by,
                                  COALESCE(v_error, 'no reason recorded'));
  END IF;
  RETURN QUERY SELECT v_verdict, v_reason, NULL::bigint, NULL::text, NULL::text, NULL::text[], NULL::text[],
                      NULL::text[], NULL::text, NULL::text, NULL::text, NULL::jsonb, NULL::text, NULL::int,
                      NULL::timestamptz;
END
$$;

-- not_sent: the attempt of event p_event certainly handed nothing to the SMTP
-- server; a later attempt may send. True when it cleared the mark.
CREATE FUNCTION pgrelay_notifier.not_sent(p_notification_id bigint, p_event bigint) RETURNS bool
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  WITH c AS (
    UPDATE pgrelay_notifier.notifications n SET send_in_doubt = false
     WHERE n.notification_id = p_notification_id AND n.status = 'sending'
       AND n.sending_event = p_event AND n.send_in_doubt
    RETURNING 1
  )
  SELECT EXISTS (SELECT FROM c);
$$;

GRANT CREATE ON SCHEMA pgrelay_notifier TO pgrelay_notifier;
ALTER FUNCTION pgrelay_notifier.not_sent(bigint, bigint) OWNER TO pgrelay_notifier;
REVOKE CREATE ON SCHEMA pgrelay_notifier FROM pgrelay_notifier;
REVOKE ALL ON FUNCTION pgrelay_notifier.not_sent(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay_notifier.not_sent(bigint, bigint) TO pgrelay_processor;
