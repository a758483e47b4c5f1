-- 0011: nodes and retention keep their promises.
--
-- * A row pinned to a node is only ever changed by that node, or by an
--   explicit decommission. _rescue took back a claim held past its channel's
--   timeout when its holder's row was gone, whoever the row was pinned to; as
--   _adopt removes a dead node's Processor rows, another node then released
--   (or, on their last attempt, gave up, failing their emails) the dead
--   node's pinned claims. _rescue now leaves rows pinned to another node alone.

-- ---------------------------------------------------------------------------
-- Pinned rows: only their node rescues them
-- ---------------------------------------------------------------------------

-- The rest of the function is 0008's: the held rows exclude rows pinned to
-- another node (run_in_node).
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
  SELECT (SELECT count(*) FROM lg), e.ids, e.whys
    INTO n, v_emails, v_whys
    FROM (SELECT pg_catalog.array_agg(gone.payload::bigint ORDER BY gone.id) AS ids,
                 pg_catalog.array_agg(held.why ORDER BY gone.id) AS whys
            FROM gone
            JOIN held ON held.id = gone.id
            JOIN pgrelay.channels c ON c.channel = gone.channel AND c.kind = 'email'
           WHERE gone.payload ~ '^[0-9]{1,18}$') e;
  FOR i IN 1 .. COALESCE(pg_catalog.cardinality(v_emails), 0) LOOP
    PERFORM pgrelay_notifier.set_status(v_emails[i], 'failed',
      'gave up: ' || v_whys[i] || ' (its last attempt)');
  END LOOP;
  RETURN n;
END
$$;
