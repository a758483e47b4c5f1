-- Status events on NATS (docs/events.md): what the Processor's event publisher
-- needs in the database.
--
-- (channels.publish_payload and register()/update()'s p_publish_payload are
-- in 0001: a channel opts in to having its payloads in the events it
-- publishes, off by default as payloads may hold secrets.)
-- * event_payloads: the payloads of opted-in channels, kept from enqueue time,
--   because a queue row is gone by the time its outcome is published.
-- * publish_cursors: how far each node's publisher has published each source,
--   durable, so a restart or a NATS outage loses nothing.
-- * log (node, id): the publisher's scan, one node's rows in id order.
-- * _publish_horizon(): the id below which no row can still be uncommitted.

-- ---------------------------------------------------------------------------
-- Payloads of opted-in channels
-- ---------------------------------------------------------------------------

-- The payload of every queue row (first attempts and retries) of a channel
-- with publish_payload, written when the row is inserted: by the time the
-- row's outcome is published the row is gone. Only opted-in channels pay for
-- this write. The janitor trims it with the log (_trim_event_payloads).
CREATE TABLE pgrelay.event_payloads (
  queue_id bigint PRIMARY KEY,
  payload  text NOT NULL
);

-- Statement-level, on the transition table the queue's wake trigger already
-- captures: one query per inserting statement, nothing per row.
CREATE FUNCTION pgrelay._queue_keep_payloads() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  INSERT INTO pgrelay.event_payloads (queue_id, payload)
  SELECT n.id, n.payload
    FROM new_rows n
    JOIN pgrelay.channels c ON c.channel = n.channel
   WHERE c.publish_payload
  ON CONFLICT (queue_id) DO NOTHING;
  RETURN NULL;
END
$$;

CREATE TRIGGER queue_keep_payloads AFTER INSERT ON pgrelay.queue
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION pgrelay._queue_keep_payloads();

-- _trim_event_payloads: deletes up to p_batch kept payloads older than
-- p_older_than whose queue row is gone (the log rows that could name them are
-- trimmed at the same age).
CREATE FUNCTION pgrelay._trim_event_payloads(p_older_than interval, p_batch int) RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n int;
BEGIN
  DELETE FROM pgrelay.event_payloads e
   WHERE e.queue_id IN (SELECT x.queue_id FROM pgrelay.event_payloads x
                         WHERE x.queue_id < pgrelay._id_floor(now() - p_older_than)
                           AND NOT EXISTS (SELECT FROM pgrelay.queue q WHERE q.id = x.queue_id)
                         ORDER BY x.queue_id LIMIT p_batch);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

-- ---------------------------------------------------------------------------
-- The publisher's cursor and scan
-- ---------------------------------------------------------------------------

-- One row per (node, source): every row of the source written by that node
-- with an id up to last_id is in NATS. Sources: 'log' (pgrelay.log) and
-- 'notifier' (pgrelay_notifier.status_events). Each node has its own rows, so
-- the table replicates without conflicts on a multi-master cluster.
CREATE TABLE pgrelay.publish_cursors (
  node_id    int NOT NULL,
  source     text NOT NULL,
  last_id    bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (node_id, source),
  CONSTRAINT publish_cursors_node CHECK (node_id BETWEEN 0 AND 1023),
  CONSTRAINT publish_cursors_source CHECK (source IN ('log', 'notifier'))
);

-- The publisher reads one node's rows past its cursor in id order, and the
-- backlog counts them.
CREATE INDEX log_node_id ON pgrelay.log (node, id);

-- _publish_horizon: an id below which no row of this database can still be
-- uncommitted. Ids are taken from the clock when a row is inserted
-- (_next_id), so a row can commit after a row with a larger id was already
-- published; a cursor moved past it would skip it for good. A transaction
-- that has written anything has a backend_xid, and every id it took carries a
-- time no earlier than its xact_start less the counter's lag behind the clock
-- (at most 100 ms); one that has not written yet will take ids from now on.
-- So rows with ids below the floor of min(now, oldest writing transaction's
-- start) - 200 ms are all committed or gone. A long writing transaction holds
-- publishing back; it never loses an event.
--
-- SECURITY DEFINER: pg_stat_activity hides other roles' transactions from an
-- unprivileged role. The owner (who ran the migration) must be a superuser or
-- a member of pg_read_all_stats; otherwise this refuses rather than guess.
CREATE FUNCTION pgrelay._publish_horizon() RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_oldest timestamptz;
BEGIN
  IF NOT pg_catalog.pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') THEN
    RAISE EXCEPTION 'pgrelay: the owner of pgrelay._publish_horizon(), %, cannot see other sessions'' transactions',
      current_user USING ERRCODE = 'PR040',
      HINT = pg_catalog.format('GRANT pg_read_all_stats TO %I;', current_user);
  END IF;
  SELECT min(COALESCE(a.xact_start, a.backend_start)) INTO v_oldest
    FROM pg_catalog.pg_stat_activity a
   WHERE a.backend_xid IS NOT NULL
     AND a.datname = pg_catalog.current_database()
     AND a.pid <> pg_catalog.pg_backend_pid();
  RETURN pgrelay._id_floor(LEAST(pg_catalog.clock_timestamp(), v_oldest) - interval '200 milliseconds');
END
$$;

-- _notifier_status_batch: the notifier source's scan (the log's is a plain
-- query on pgrelay.log). The notifier's schema is a later migration's: PL/pgSQL
-- resolves the table when called, and the publisher calls this only when
-- to_regclass('pgrelay_notifier.status_events') is not NULL. SECURITY DEFINER
-- so the Processor role needs no grant on the notifier's table.
CREATE FUNCTION pgrelay._notifier_status_batch(p_node int, p_after bigint, p_before bigint, p_limit int)
RETURNS TABLE (id bigint, notification_id bigint, channel text, status text, error text, node int,
               at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN QUERY
  SELECT s.id, s.notification_id, s.channel, s.status, s.error, s.node, s.at
    FROM pgrelay_notifier.status_events s
   WHERE s.node = p_node AND s.id > p_after AND s.id < p_before
   ORDER BY s.id
   LIMIT p_limit;
END
$$;

-- publish_backlog: per publisher cursor, how many rows of its node are not
-- yet published, counted up to p_cap + 1 (a count above p_cap means "more
-- than p_cap"): cheap on any backlog, by the (node, id) index.
CREATE FUNCTION pgrelay.publish_backlog(p_cap int DEFAULT 100000)
RETURNS TABLE (node_id int, source text, last_id bigint, backlog bigint, updated_at timestamptz)
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
    IF c.source = 'log' THEN
      SELECT count(*) INTO backlog
        FROM (SELECT FROM pgrelay.log l WHERE l.node = c.node_id AND l.id > c.last_id
               LIMIT p_cap + 1) x;
    ELSIF pg_catalog.to_regclass('pgrelay_notifier.status_events') IS NOT NULL THEN
      EXECUTE 'SELECT count(*) FROM (SELECT FROM pgrelay_notifier.status_events s
                WHERE s.node = $1 AND s.id > $2 LIMIT $3) x'
        INTO backlog USING c.node_id, c.last_id, p_cap + 1;
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

REVOKE ALL ON pgrelay.event_payloads, pgrelay.publish_cursors FROM PUBLIC;
REVOKE ALL ON FUNCTION
  pgrelay._queue_keep_payloads(), pgrelay._trim_event_payloads(interval, int),
  pgrelay._publish_horizon(), pgrelay._notifier_status_batch(int, bigint, bigint, int),
  pgrelay.publish_backlog(int)
  FROM PUBLIC;

GRANT EXECUTE ON FUNCTION pgrelay.publish_backlog(int) TO pgrelay_admin;
GRANT SELECT ON pgrelay.publish_cursors, pgrelay.event_payloads TO pgrelay_admin;

-- Processors: the payload capture runs in their _complete (retries), the
-- publisher reads and advances its cursor, the janitor trims.
GRANT SELECT, INSERT, DELETE ON pgrelay.event_payloads TO pgrelay_processor;
GRANT SELECT, INSERT, UPDATE ON pgrelay.publish_cursors TO pgrelay_processor;
GRANT EXECUTE ON FUNCTION
  pgrelay._queue_keep_payloads(), pgrelay._trim_event_payloads(interval, int),
  pgrelay._publish_horizon(), pgrelay._notifier_status_batch(int, bigint, bigint, int),
  pgrelay.publish_backlog(int)
  TO pgrelay_processor;
