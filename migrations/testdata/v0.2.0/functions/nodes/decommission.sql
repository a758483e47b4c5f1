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

CREATE OR REPLACE FUNCTION pgrelay.decommission(p_node integer, p_dead_after interval DEFAULT '00:01:00'::interval) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
    RETURNING q.id, q.origin_id, q.channel, q.attempt, q.payload, q.run_in_node, q.priority,
              pg_catalog.format('%s: a row pinned to it can never run%s', v_why,
                                CASE WHEN q.dispatched_at IS NOT NULL
                                     THEN pg_catalog.format(' (its processor %s held attempt %s)',
                                                            q.dispatched_by, q.attempt)
                                     ELSE '' END) AS why
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, priority)
    SELECT d.id, d.origin_id, d.channel, d.attempt, 'gave_up', d.why, NULLIF(d.priority, 0)
      FROM d ORDER BY d.id
    RETURNING 1
  ), dl AS (
    INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, last_error, outcome,
                                      ended_at, node, run_in_node, notification_id, priority)
    SELECT d.id, d.origin_id, d.channel, d.payload, d.attempt, d.why, 'gave_up',
           pg_catalog.clock_timestamp(), pgrelay._this_node(), d.run_in_node,
           pgrelay._notification_of(c.kind, d.payload), NULLIF(d.priority, 0)
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
   WHERE pgrelay._may_adopt(x) AND x.node_id <> p_node AND x.last_seen >= now() - p_dead_after;
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
$_$;

REVOKE ALL ON FUNCTION pgrelay.decommission(integer, interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.decommission(p_node integer, p_dead_after interval) TO pgrelay_admin;
