-- 0011: nodes and retention keep their promises.
--
-- * A row pinned to a node is only ever changed by that node, or by an
--   explicit decommission. _rescue took back a claim held past its channel's
--   timeout when its holder's row was gone, whoever the row was pinned to; as
--   _adopt removes a dead node's Processor rows, another node then released
--   (or, on their last attempt, gave up, failing their emails) the dead
--   node's pinned claims. _rescue now leaves rows pinned to another node alone.
-- * decommission keeps a tombstone (nodes.decommissioned_at) instead of
--   deleting the node's row, and hands the node's unrestricted rows to the
--   live node that adopts, at once (_adopt_rows, shared with _adopt). Rows of
--   the node that arrive later through replication are adopted at the
--   adopter's next look, as for any dead node. A Processor that starts (or
--   heartbeats) under the id clears the tombstone. decommission also
--   discards the node's pinned rows that its dead Processors held, which
--   nothing else may touch any more, and fails their emails.
-- * Retention keeps what the NATS publisher has not published: _trim_log
--   deletes a node's log rows past the retention only up to that node's
--   publish cursor, when it has one (a publisher ran for it), up to a cap
--   past which it deletes them all the same and records each batch in
--   pgrelay.log_dropped. _trim_event_payloads keeps the payloads those rows
--   may still need. publish_backlog() also gives the age of the oldest
--   unpublished row.

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

-- ---------------------------------------------------------------------------
-- Decommissioned nodes: a tombstone, and adoption of their rows
-- ---------------------------------------------------------------------------

-- Set by decommission(); cleared by the heartbeat of a Processor that runs
-- under the id again. A decommissioned node counts as dead whatever its last
-- heartbeat, so its unrestricted rows, including those that reach this node
-- later through replication, are adopted.
ALTER TABLE pgrelay.nodes ADD COLUMN decommissioned_at timestamptz NULL;

-- _adopt_rows: node p_adopter takes over the unrestricted work of node
-- p_dead: the rows p_dead owns (owner_node becomes p_adopter) and those its
-- Processors (p_procs) had claimed (back to pending). Each gets an
-- 'adopted' log row, written as this node, whose error is p_why followed by
-- who adopted. Rows pinned to a node are never touched. The one place both
-- _adopt and decommission hand work over.
CREATE FUNCTION pgrelay._adopt_rows(p_dead int, p_adopter int, p_procs bigint[], p_why text)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n int;
BEGIN
  WITH t AS (
    SELECT q.id, q.origin_id, q.channel, q.attempt, q.dispatched_at IS NOT NULL AS was_claimed
      FROM pgrelay.queue q
     WHERE q.run_in_node IS NULL
       AND (q.owner_node = p_dead OR (q.dispatched_at IS NOT NULL AND q.dispatched_by = ANY (p_procs)))
     FOR UPDATE OF q SKIP LOCKED
  ), u AS (
    UPDATE pgrelay.queue q
       SET owner_node = CASE WHEN q.owner_node = p_dead THEN p_adopter ELSE q.owner_node END,
           dispatched_at = CASE WHEN q.dispatched_by = ANY (p_procs) THEN NULL ELSE q.dispatched_at END,
           dispatched_by = CASE WHEN q.dispatched_by = ANY (p_procs) THEN NULL ELSE q.dispatched_by END
      FROM t
     WHERE q.id = t.id
    RETURNING q.id
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error)
    SELECT t.id, t.origin_id, t.channel, t.attempt, 'adopted',
           pg_catalog.format('%s; adopted by node %s%s', p_why, p_adopter,
                             CASE WHEN t.was_claimed THEN ' (its claim was taken back)' ELSE '' END)
      FROM t WHERE t.id IN (SELECT u.id FROM u)
     ORDER BY t.id
    RETURNING 1
  )
  SELECT count(*) INTO n FROM lg;
  RETURN n;
END
$$;

-- _adopt: the unrestricted work of dead nodes (no heartbeat for p_dead_after,
-- or decommissioned) is taken over by exactly one live node: the live node
-- with the smallest id, a choice every node makes the same from the same
-- replicated nodes table. Rows pinned to the dead node are never adopted:
-- they wait for it, or for pgrelay.decommission(). A dead node is looked at
-- again at most every p_dead_after, for rows that reached this node late
-- through replication — a decommissioned node too, for as long as its
-- tombstone stays.
CREATE OR REPLACE FUNCTION pgrelay._adopt(p_dead_after interval) RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  d pgrelay.nodes;
  v_adopter int;
  v_procs bigint[];
  n int := 0;
BEGIN
  SELECT min(x.node_id) INTO v_adopter FROM pgrelay.nodes x
   WHERE x.node_id >= 0 AND x.last_seen >= now() - p_dead_after AND x.mode <> 'single'
     AND x.decommissioned_at IS NULL;
  IF v_adopter IS DISTINCT FROM v_node THEN
    RETURN 0;
  END IF;
  FOR d IN
    SELECT * FROM pgrelay.nodes x
     WHERE x.node_id >= 0 AND x.node_id <> v_node
       AND (x.last_seen < now() - p_dead_after OR x.decommissioned_at IS NOT NULL)
       AND x.mode <> 'single'
       AND (x.adopted_at IS NULL OR x.adopted_at < now() - p_dead_after)
     ORDER BY x.node_id
     FOR UPDATE SKIP LOCKED
  LOOP
    SELECT COALESCE(pg_catalog.array_agg(p.processor_id), '{}') INTO v_procs
      FROM pgrelay.processors p WHERE p.node_id = d.node_id;
    n := n + pgrelay._adopt_rows(d.node_id, v_node, v_procs,
      CASE WHEN d.decommissioned_at IS NOT NULL
           THEN pg_catalog.format('node %s was decommissioned', d.node_id)
           ELSE pg_catalog.format('node %s is dead (no heartbeat for %s)', d.node_id, p_dead_after) END);
    DELETE FROM pgrelay.processors p WHERE p.node_id = d.node_id;
    UPDATE pgrelay.nodes x SET adopted_at = now() WHERE x.node_id = d.node_id;
  END LOOP;
  RETURN n;
END
$$;

-- decommission: node p_node is gone for good. Refuses a node that
-- heartbeated within p_dead_after. Then, in one transaction:
-- * its pinned rows (node-restricted channels), pending or held by its dead
--   Processors, can never run anywhere else: they are discarded, each logged
--   'gave_up' with the reason (an email's notification ends 'failed');
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
  SELECT (SELECT count(*) FROM lg), e.ids, e.errors
    INTO n, v_emails, v_errors
    FROM (SELECT pg_catalog.array_agg(d.payload::bigint ORDER BY d.id) AS ids,
                 pg_catalog.array_agg(d.why ORDER BY d.id) AS errors
            FROM d
            JOIN pgrelay.channels c ON c.channel = d.channel AND c.kind = 'email'
           WHERE d.payload ~ '^[0-9]{1,18}$') e;
  -- A discarded email event never reaches the email handler: its
  -- notification ends 'failed' here (a notification sent meanwhile stays
  -- 'sent': set_status never moves a status backwards).
  FOR i IN 1 .. COALESCE(pg_catalog.cardinality(v_emails), 0) LOOP
    PERFORM pgrelay_notifier.set_status(v_emails[i], 'failed', 'gave up: ' || v_errors[i]);
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

-- _processor_start and _heartbeat as in 0001; a node that runs again under a
-- decommissioned id is a node again (its tombstone is cleared).
CREATE OR REPLACE FUNCTION pgrelay._processor_start(p_mode text, p_hostname text, p_pid int, p_version text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_id bigint := pgrelay._next_id();
  v_node int := pgrelay._this_node();
BEGIN
  INSERT INTO pgrelay.processors (processor_id, node_id, mode, hostname, pid, version)
  VALUES (v_id, v_node, p_mode, p_hostname, p_pid, p_version);
  INSERT INTO pgrelay.nodes (node_id, mode, hostname, version)
  VALUES (v_node, p_mode, p_hostname, p_version)
  ON CONFLICT (node_id) DO UPDATE
    SET last_seen = now(), mode = EXCLUDED.mode, hostname = EXCLUDED.hostname,
        version = EXCLUDED.version, decommissioned_at = NULL;
  RETURN v_id;
END
$$;

CREATE OR REPLACE FUNCTION pgrelay._heartbeat(p_processor bigint, p_mode text, p_hostname text, p_pid int,
                                              p_version text)
RETURNS bool
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_alive bool;
BEGIN
  UPDATE pgrelay.processors p SET last_seen = now() WHERE p.processor_id = p_processor;
  v_alive := FOUND;
  IF NOT v_alive THEN
    INSERT INTO pgrelay.processors (processor_id, node_id, mode, hostname, pid, version)
    VALUES (p_processor, v_node, p_mode, p_hostname, p_pid, p_version);
  END IF;
  INSERT INTO pgrelay.nodes (node_id, mode, hostname, version)
  VALUES (v_node, p_mode, p_hostname, p_version)
  ON CONFLICT (node_id) DO UPDATE
    SET last_seen = now(), mode = EXCLUDED.mode, hostname = EXCLUDED.hostname,
        version = EXCLUDED.version, decommissioned_at = NULL;
  RETURN v_alive;
END
$$;

-- nodes_overview gains the tombstone: a decommissioned node is never alive.
-- (The result type changes, so the function is created again; 0007 made it
-- run as its caller.)
DROP FUNCTION pgrelay.nodes_overview(interval);
CREATE FUNCTION pgrelay.nodes_overview(p_dead_after interval DEFAULT '10 seconds')
RETURNS TABLE (node_id int, mode text, last_seen timestamptz, alive bool, leader bool,
               processors bigint, pending bigint, pinned bigint, hostname text, version text,
               decommissioned_at timestamptz)
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
  WITH l AS (SELECT x.leader_node, x.lease_until FROM pgrelay.nodes x WHERE x.node_id = -1),
  q AS (
    SELECT COALESCE(q.run_in_node, q.owner_node) AS node,
           count(*) FILTER (WHERE q.run_in_node IS NULL) AS pending,
           count(*) FILTER (WHERE q.run_in_node IS NOT NULL) AS pinned
      FROM pgrelay.queue q WHERE q.dispatched_at IS NULL
     GROUP BY 1
  )
  SELECT n.node_id, n.mode, n.last_seen,
         n.last_seen >= now() - p_dead_after AND n.decommissioned_at IS NULL,
         COALESCE((SELECT l.leader_node = n.node_id AND l.lease_until > now() FROM l), false),
         (SELECT count(*) FROM pgrelay.processors p WHERE p.node_id = n.node_id),
         COALESCE(q.pending, 0), COALESCE(q.pinned, 0), n.hostname, n.version, n.decommissioned_at
    FROM pgrelay.nodes n LEFT JOIN q ON q.node = n.node_id
   WHERE n.node_id >= 0
   ORDER BY n.node_id
$$;

-- ---------------------------------------------------------------------------
-- Retention keeps what is not published
-- ---------------------------------------------------------------------------

-- One row per batch of log rows that retention deleted before the NATS
-- publisher of their node had published them (past the cap): whose rows
-- (node), how many, their id and time ranges, and which node's janitor
-- deleted them when. Written by _trim_log in the transaction that deletes the
-- rows. Nothing trims it: delete what you have looked at.
CREATE TABLE pgrelay.log_dropped (
  id         bigint PRIMARY KEY DEFAULT pgrelay._next_id(),
  node       int NOT NULL,
  rows       bigint NOT NULL,
  first_id   bigint NOT NULL,
  last_id    bigint NOT NULL,
  first_at   timestamptz NOT NULL,
  last_at    timestamptz NOT NULL,
  dropped_at timestamptz NOT NULL DEFAULT now(),
  dropped_by int NOT NULL DEFAULT pgrelay._this_node()
);

-- _trim_log: deletes up to p_batch log rows older than p_older_than, oldest
-- first per node, by the (node, id) index (ids carry their creation time).
-- A node with a log publish cursor has a NATS publisher: its rows past the
-- cursor are not published yet and are kept, unless older than
-- p_unpublished_max (at least p_older_than; NULL: kept for as long as it
-- takes). Those are deleted all the same, recorded in pgrelay.log_dropped,
-- and returned in dropped (of deleted) with the smallest and largest id.
DROP FUNCTION pgrelay._trim_log(interval, int);
CREATE FUNCTION pgrelay._trim_log(p_older_than interval, p_batch int, p_unpublished_max interval DEFAULT NULL)
RETURNS TABLE (deleted int, dropped int, dropped_first bigint, dropped_last bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_floor bigint := pgrelay._id_floor(now() - p_older_than);
  v_cap bigint;
  v_node int;
  v_cur bigint;
  v_upto bigint;
  v_left int := p_batch;
  n int;
  r record;
BEGIN
  deleted := 0;
  dropped := 0;
  IF p_unpublished_max IS NOT NULL THEN
    v_cap := LEAST(v_floor, pgrelay._id_floor(now() - p_unpublished_max));
  END IF;
  -- The nodes that wrote log rows: a loose scan of the (node, id) index.
  FOR v_node IN
    WITH RECURSIVE ns AS (
      SELECT (SELECT min(l.node) FROM pgrelay.log l) AS node
      UNION ALL
      SELECT (SELECT min(l.node) FROM pgrelay.log l WHERE l.node > ns.node) FROM ns WHERE ns.node IS NOT NULL
    )
    SELECT ns.node FROM ns WHERE ns.node IS NOT NULL
  LOOP
    EXIT WHEN v_left <= 0;
    v_cur := NULL;
    SELECT c.last_id INTO v_cur FROM pgrelay.publish_cursors c WHERE c.node_id = v_node AND c.source = 'log';
    -- Published (or no publisher) and past the retention: one index range,
    -- so that rows held back are not read again at every call.
    -- (The row comparisons keep the generic plan on log_node_id: with
    -- x.node = v_node the planner may walk the primary key instead, through
    -- every other node's rows; TestExplainTrimLogUsesNodeIndex.)
    v_upto := CASE WHEN v_cur IS NULL THEN v_floor ELSE LEAST(v_floor, v_cur + 1) END;
    DELETE FROM pgrelay.log l
     WHERE l.id = ANY (ARRAY(SELECT x.id FROM pgrelay.log x
                              WHERE (x.node, x.id) >= (v_node, 0::bigint) AND (x.node, x.id) < (v_node, v_upto)
                              ORDER BY x.node, x.id LIMIT v_left));
    GET DIAGNOSTICS n = ROW_COUNT;
    deleted := deleted + n;
    v_left := v_left - n;
    -- Unpublished and past the cap.
    IF v_cur IS NOT NULL AND v_cap IS NOT NULL AND v_left > 0 THEN
      WITH x AS (
        DELETE FROM pgrelay.log l
         WHERE l.id = ANY (ARRAY(SELECT x.id FROM pgrelay.log x
                                  WHERE (x.node, x.id) > (v_node, v_cur) AND (x.node, x.id) < (v_node, v_cap)
                                  ORDER BY x.node, x.id LIMIT v_left))
        RETURNING l.id, l.at
      )
      SELECT count(*)::int AS rows, min(x.id) AS first_id, max(x.id) AS last_id, min(x.at) AS first_at,
             max(x.at) AS last_at
        INTO r FROM x;
      IF r.rows > 0 THEN
        INSERT INTO pgrelay.log_dropped (node, rows, first_id, last_id, first_at, last_at)
        VALUES (v_node, r.rows, r.first_id, r.last_id, r.first_at, r.last_at);
        deleted := deleted + r.rows;
        dropped := dropped + r.rows;
        v_left := v_left - r.rows;
        dropped_first := LEAST(dropped_first, r.first_id);
        dropped_last := GREATEST(dropped_last, r.last_id);
      END IF;
    END IF;
  END LOOP;
  RETURN NEXT;
END
$$;

-- _trim_event_payloads: deletes up to p_batch kept payloads older than
-- p_older_than whose queue row is gone and that no publisher may still
-- need: with publishers (log publish cursors), only payloads of events up to
-- the least advanced cursor, or older than p_unpublished_max (as in
-- _trim_log).
DROP FUNCTION pgrelay._trim_event_payloads(interval, int);
CREATE FUNCTION pgrelay._trim_event_payloads(p_older_than interval, p_batch int,
                                             p_unpublished_max interval DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_floor bigint := pgrelay._id_floor(now() - p_older_than);
  v_published bigint;
  n int;
BEGIN
  SELECT min(c.last_id) INTO v_published FROM pgrelay.publish_cursors c WHERE c.source = 'log';
  IF v_published IS NOT NULL THEN
    v_floor := LEAST(v_floor, GREATEST(v_published + 1,
      CASE WHEN p_unpublished_max IS NOT NULL THEN pgrelay._id_floor(now() - p_unpublished_max) END));
  END IF;
  DELETE FROM pgrelay.event_payloads e
   WHERE e.queue_id IN (SELECT x.queue_id FROM pgrelay.event_payloads x
                         WHERE x.queue_id < v_floor
                           AND NOT EXISTS (SELECT FROM pgrelay.queue q WHERE q.id = x.queue_id)
                         ORDER BY x.queue_id LIMIT p_batch);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

-- publish_backlog gains oldest_at: the time of the oldest row not yet
-- published (NULL when none), the publisher's lag in time.
DROP FUNCTION pgrelay.publish_backlog(int);
CREATE FUNCTION pgrelay.publish_backlog(p_cap int DEFAULT 100000)
RETURNS TABLE (node_id int, source text, last_id bigint, backlog bigint, updated_at timestamptz,
               oldest_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  c pgrelay.publish_cursors;
BEGIN
  FOR c IN SELECT * FROM pgrelay.publish_cursors x ORDER BY x.node_id, x.source LOOP
    node_id := c.node_id;
    source := c.source;
    last_id := c.last_id;
    updated_at := c.updated_at;
    oldest_at := NULL;
    IF c.source = 'log' THEN
      SELECT count(*) INTO backlog
        FROM (SELECT FROM pgrelay.log l WHERE l.node = c.node_id AND l.id > c.last_id
               LIMIT p_cap + 1) x;
      SELECT l.at INTO oldest_at FROM pgrelay.log l
       WHERE l.node = c.node_id AND l.id > c.last_id ORDER BY l.node, l.id LIMIT 1;
    ELSIF pg_catalog.to_regclass('pgrelay_notifier.status_events') IS NOT NULL THEN
      EXECUTE 'SELECT count(*) FROM (SELECT FROM pgrelay_notifier.status_events s
                WHERE s.node = $1 AND s.id > $2 LIMIT $3) x'
        INTO backlog USING c.node_id, c.last_id, p_cap + 1;
      EXECUTE 'SELECT s.at FROM pgrelay_notifier.status_events s
                WHERE s.node = $1 AND s.id > $2 ORDER BY s.node, s.id LIMIT 1'
        INTO oldest_at USING c.node_id, c.last_id;
    ELSE
      backlog := 0;
    END IF;
    RETURN NEXT;
  END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- Privileges
-- ---------------------------------------------------------------------------

REVOKE ALL ON FUNCTION pgrelay._adopt_rows(int, int, bigint[], text), pgrelay.nodes_overview(interval)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay.nodes_overview(interval) TO pgrelay_admin, pgrelay_processor;
GRANT EXECUTE ON FUNCTION pgrelay._adopt_rows(int, int, bigint[], text) TO pgrelay_processor;

REVOKE ALL ON pgrelay.log_dropped FROM PUBLIC;
REVOKE ALL ON FUNCTION
  pgrelay._trim_log(interval, int, interval), pgrelay._trim_event_payloads(interval, int, interval),
  pgrelay.publish_backlog(int)
  FROM PUBLIC;
GRANT SELECT ON pgrelay.log_dropped TO pgrelay_admin;
GRANT SELECT, INSERT ON pgrelay.log_dropped TO pgrelay_processor;
GRANT EXECUTE ON FUNCTION pgrelay.publish_backlog(int) TO pgrelay_admin, pgrelay_processor;
GRANT EXECUTE ON FUNCTION
  pgrelay._trim_log(interval, int, interval), pgrelay._trim_event_payloads(interval, int, interval)
  TO pgrelay_processor;
