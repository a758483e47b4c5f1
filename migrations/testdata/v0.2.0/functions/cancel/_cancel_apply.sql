-- _cancel_apply: ends the rows of event p_origin that this node runs and no
-- transaction holds (a direct batch's, a claim's are left to finish their
-- attempt), if a request asks for it; returns whether it ended one.

CREATE OR REPLACE FUNCTION pgrelay._cancel_apply(p_origin bigint) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
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
    RETURNING q.id, q.origin_id, q.channel, q.attempt, q.payload, q.priority
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node, priority)
    SELECT del.id, del.origin_id, del.channel, del.attempt, 'cancelled', v_reason, v_node,
           NULLIF(del.priority, 0)
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

REVOKE ALL ON FUNCTION pgrelay._cancel_apply(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._cancel_apply(p_origin bigint) TO pgrelay_processor;
