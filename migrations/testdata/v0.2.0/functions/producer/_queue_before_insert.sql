-- _queue_before_insert: derives a queue row's columns from its channel
-- (run_in_node, lane, phash, expires_at, and origin_id when not given) for
-- the rows inserted into pgrelay.queue directly: direct inserts of companion
-- applications and the retry rows of a completion. The producer functions
-- (notify(), notify_many(), the deduplicating insert) insert through
-- _enqueue, which derives the same columns with the same helpers (_pin_of,
-- _lane_of, _phash_of, _expiry_of) once per statement: they run with
-- pgrelay.stamped = 'on' (set by _enqueue around its insert, not by a SET
-- clause: a function's SET of a custom setting needs a superuser to create
-- it since PostgreSQL 15, and the owner may not be one), and the trigger's WHEN
-- clause passes over the rows inserted while it is on. That skips a function
-- call and a read of the channel per row (four fifths of a batched insert's
-- CPU). Only pgrelay_processor and the schema's owner may insert into
-- pgrelay.queue at all (producers may not), and both may update its rows
-- anyway: setting pgrelay.stamped in their own session gives them nothing
-- they do not have.
--
-- ENABLE ALWAYS, so that it fires under session_replication_role = replica
-- too, where an ordinary trigger does not: a companion's replication-aware
-- trigger may call notify() in the apply worker of logical replication. The
-- apply worker (and a table synchronisation) also inserts the rows
-- replicated from other nodes, stamped where they were enqueued: those are
-- left exactly as they come (a row keeps the pin of the node it was notified
-- on, and its channel may not have reached this node yet). A replicated row
-- names its origin and carries an id another node drew (the id's node bits,
-- see _next_id_at; nodes of a cluster have distinct ids). A row enqueued
-- here carries this node's bits, in the replica role too: ids are drawn
-- where the row is enqueued.
--
-- A row inserted without origin_id (a direct insert) first takes the
-- producer's lock on its channel (_lock_channel); rows that name their
-- origin (the producer functions, which took it already, and retry rows) do
-- not. SECURITY DEFINER: the lock rows are pgrelay's, not the inserting
-- role's. A row that sets not_before later than its enqueued_at (a delayed
-- notify, or a direct insert doing the same) expires that long after its
-- not_before. Retry rows keep the expiry of their first attempt.
--
-- In the replica role no statement trigger fires either: a row of a
-- publish_payload channel enqueued there keeps its payload here, as
-- queue_keep_payloads does in the origin role (_enqueue keeps those of the
-- producer functions' rows).

CREATE OR REPLACE FUNCTION pgrelay._queue_before_insert() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  ch pgrelay.channels;
  v_replica bool := pg_catalog.current_setting('session_replication_role') = 'replica';
BEGIN
  IF v_replica AND NEW.origin_id IS NOT NULL
     AND pgrelay._id_node(NEW.id) <> pgrelay._this_node() THEN
    RETURN NEW;
  END IF;
  IF NEW.origin_id IS NULL THEN
    PERFORM pgrelay._lock_channel(NEW.channel);
  END IF;
  SELECT * INTO ch FROM pgrelay.channels c WHERE c.channel = NEW.channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay: unknown channel %', pg_catalog.quote_literal(NEW.channel)
      USING ERRCODE = 'PR001';
  END IF;
  NEW.origin_id := COALESCE(NEW.origin_id, NEW.id);
  -- The pin is always worked out here, never taken from the caller.
  NEW.run_in_node := pgrelay._pin_of(ch.node_restricted, pgrelay._this_node());
  NEW.lane := pgrelay._lane_of(ch.concurrency_mode, NEW.payload);
  NEW.phash := pgrelay._phash_of(ch.deduplicate, NEW.payload);
  IF NEW.retry_of IS NULL AND NEW.expires_at IS NULL THEN
    NEW.expires_at := pgrelay._expiry_of(ch.expire_after, NEW.enqueued_at, NEW.not_before);
  END IF;
  IF v_replica AND ch.publish_payload THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload) VALUES (NEW.id, NEW.payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  RETURN NEW;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._queue_before_insert() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._queue_before_insert() TO pgrelay_processor;

CREATE OR REPLACE TRIGGER queue_before_insert BEFORE INSERT ON pgrelay.queue FOR EACH ROW WHEN ((current_setting('pgrelay.stamped'::text, true) IS DISTINCT FROM 'on'::text)) EXECUTE FUNCTION pgrelay._queue_before_insert();

ALTER TABLE pgrelay.queue ENABLE ALWAYS TRIGGER queue_before_insert;
