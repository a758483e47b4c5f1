-- start_sending_many: the send gate, for several queue events in one call
-- and one transaction: whether queue event p_events[i] (its origin_id) of
-- channel p_channels[i] may send notification p_notification_ids[i] now, and
-- the message when it may. One row per element, ord = i (in rounds: order
-- by ord). verdict:
--   send       the event holds the notification: it moved it from queued to
--              sending now, or it already held it (its earlier attempt
--              certainly handed nothing over): a new attempt. The message
--              columns are fetch()'s. The notification is in doubt
--              (send_in_doubt) from here until the handler records the
--              outcome: sent, or not_sent().
--   in_doubt   this event's earlier attempt may have handed the message to
--              the SMTP server and its outcome is unknown: not sent again,
--              the handler fails the notification with the reason.
--   sent       this event already sent it (a redelivery): nothing to do.
--   cancelled  cancel() stopped it: nothing to send.
--   missing    no such notification on this node (not replicated here yet,
--              or deleted): retry with the channel's backoff, then give up
--              naming the notification.
--   refused    never to be sent by this event: created for another channel,
--              or held or ended by another event (or failed).
-- reason says why for every verdict but send. The row locks, taken first and
-- in notification order (two calls never deadlock on each other), make a
-- concurrent cancel(), DELETE or other event's gate wait or win whole. A
-- notification 'sending' without sending_event (moved there by set_status)
-- goes to the first event that asks. Elements are decided in order, as calls
-- of start_sending() one after the other would: a notification named twice
-- is decided for its second element once its first has taken it (the second
-- event is then refused).

CREATE OR REPLACE FUNCTION pgrelay_notifier.start_sending_many(p_notification_ids bigint[], p_channels text[], p_events bigint[]) RETURNS TABLE(ord integer, verdict text, reason text, notification_id bigint, channel text, from_addr text, to_addrs text[], cc_addrs text[], bcc_addrs text[], subject text, body_text text, body_html text, headers jsonb, status text, attempts integer, created_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
  v_left int[];      -- elements not decided yet
  v_round int[];     -- this round: the first element left of each notification
  v_ords int[];
  v_verdicts text[];
  v_reasons text[];
BEGIN
  IF pg_catalog.cardinality(p_channels) IS DISTINCT FROM pg_catalog.cardinality(p_notification_ids)
     OR pg_catalog.cardinality(p_events) IS DISTINCT FROM pg_catalog.cardinality(p_notification_ids) THEN
    RAISE EXCEPTION 'pgrelay_notifier.start_sending_many: % notification ids, % channels and % events: one each per element',
      pg_catalog.cardinality(p_notification_ids), pg_catalog.cardinality(p_channels),
      pg_catalog.cardinality(p_events) USING ERRCODE = 'PR111';
  END IF;
  PERFORM FROM pgrelay_notifier.notifications n
    WHERE n.notification_id = ANY (p_notification_ids)
    ORDER BY n.notification_id
      FOR UPDATE;
  v_left := ARRAY(SELECT g FROM pg_catalog.generate_subscripts(p_notification_ids, 1) g ORDER BY g);
  WHILE pg_catalog.cardinality(v_left) > 0 LOOP
    SELECT COALESCE(pg_catalog.array_agg(s.o ORDER BY s.o) FILTER (WHERE s.rn = 1), '{}'),
           COALESCE(pg_catalog.array_agg(s.o ORDER BY s.o) FILTER (WHERE s.rn > 1), '{}')
      INTO v_round, v_left
      FROM (SELECT l.o, pg_catalog.row_number() OVER (PARTITION BY p_notification_ids[l.o] ORDER BY l.o) AS rn
              FROM unnest(v_left) AS l(o)) s;
    -- The rule, for each element of the round, from the row as it stands.
    SELECT pg_catalog.array_agg(x.o ORDER BY x.o), pg_catalog.array_agg(x.v ORDER BY x.o),
           pg_catalog.array_agg(x.r ORDER BY x.o)
      INTO v_ords, v_verdicts, v_reasons
      FROM (
        SELECT e.o,
               CASE WHEN n.notification_id IS NULL THEN 'missing'
                    WHEN n.channel IS DISTINCT FROM e.ch THEN 'refused'
                    WHEN n.status = 'sending' AND n.sending_event = e.ev AND n.send_in_doubt THEN 'in_doubt'
                    WHEN n.status = 'queued'
                         OR (n.status = 'sending' AND (n.sending_event = e.ev OR n.sending_event IS NULL)) THEN 'send'
                    WHEN n.status = 'cancelled' THEN 'cancelled'
                    WHEN n.status = 'sent' AND n.sending_event = e.ev THEN 'sent'
                    ELSE 'refused' END AS v,
               CASE WHEN n.notification_id IS NULL THEN
                      pg_catalog.format('notification %s does not exist on node %s (not replicated to this node yet, or deleted)',
                                        e.id, pgrelay._this_node())
                    WHEN n.channel IS DISTINCT FROM e.ch THEN
                      pg_catalog.format('notification %s was created for channel %s, not %s: an event only sends its own channel''s notifications',
                                        e.id, pg_catalog.quote_literal(n.channel), COALESCE(pg_catalog.quote_literal(e.ch), 'NULL'))
                    WHEN n.status = 'sending' AND n.sending_event = e.ev AND n.send_in_doubt THEN
                      pg_catalog.format('an earlier attempt of event %s may have handed notification %s to the SMTP server '
                                        '(it stopped, or lost the database, before the outcome was recorded): not sent again, '
                                        'so that it is never delivered twice; it may have been delivered', e.ev, e.id)
                    WHEN n.status = 'queued'
                         OR (n.status = 'sending' AND (n.sending_event = e.ev OR n.sending_event IS NULL)) THEN NULL
                    WHEN n.status = 'cancelled' THEN pg_catalog.format('notification %s was cancelled', e.id)
                    WHEN n.status = 'sent' AND n.sending_event = e.ev THEN
                      pg_catalog.format('notification %s was already sent by this event', e.id)
                    WHEN n.status = 'sending' THEN
                      pg_catalog.format('notification %s is already being sent%s; one send() is delivered at most once',
                                        e.id, CASE WHEN n.sending_event IS NULL THEN '' ELSE pg_catalog.format(' by event %s', n.sending_event) END)
                    WHEN n.status = 'sent' THEN
                      pg_catalog.format('notification %s was already sent%s; one send() is delivered at most once',
                                        e.id, CASE WHEN n.sending_event IS NULL THEN '' ELSE pg_catalog.format(' by event %s', n.sending_event) END)
                    ELSE pg_catalog.format('notification %s already failed%s: %s', e.id, CASE WHEN n.sending_event IS NULL THEN '' ELSE pg_catalog.format(' by event %s', n.sending_event) END,
                                           COALESCE(n.last_error, 'no reason recorded')) END AS r
          FROM (SELECT r.o, p_notification_ids[r.o] AS id, p_channels[r.o] AS ch, p_events[r.o] AS ev
                  FROM unnest(v_round) AS r(o)) e
          LEFT JOIN pgrelay_notifier.notifications n ON n.notification_id = e.id
      ) x;
    -- In doubt from here until the handler records the outcome: sent, or
    -- certainly not handed over (not_sent).
    UPDATE pgrelay_notifier.notifications n SET sending_event = p_events[s.o], send_in_doubt = true
      FROM unnest(v_ords, v_verdicts) AS s(o, v)
     WHERE s.v = 'send' AND n.notification_id = p_notification_ids[s.o];
    PERFORM pgrelay_notifier.set_status_many(
      ARRAY(SELECT p_notification_ids[s.o] FROM unnest(v_ords, v_verdicts) AS s(o, v) WHERE s.v = 'send'),
      'sending');
    RETURN QUERY
      SELECT s.o, s.v, s.r, f.*
        FROM unnest(v_ords, v_verdicts, v_reasons) AS s(o, v, r)
        LEFT JOIN LATERAL pgrelay_notifier.fetch(CASE WHEN s.v = 'send' THEN p_notification_ids[s.o] END) f ON true
       ORDER BY s.o;
  END LOOP;
END
$$;

ALTER FUNCTION pgrelay_notifier.start_sending_many(bigint[], text[], bigint[]) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.start_sending_many(bigint[], text[], bigint[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier.start_sending_many(p_notification_ids bigint[], p_channels text[], p_events bigint[]) TO pgrelay_processor;
