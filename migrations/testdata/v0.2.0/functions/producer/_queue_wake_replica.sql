-- Rows that arrive through logical replication fire no ordinary trigger and no
-- NOTIFY crosses nodes: this row trigger, enabled for the replication apply
-- worker only (ENABLE REPLICA), wakes this node's Processors for them (a
-- leader dispatches rows enqueued on other nodes). NOTIFY folds duplicates
-- within a transaction, so a replicated batch costs one wake-up.

CREATE OR REPLACE FUNCTION pgrelay._queue_wake_replica() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM pg_catalog.pg_notify('pgrelay', '');
  RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._queue_wake_replica() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._queue_wake_replica() TO pgrelay_processor;

CREATE OR REPLACE TRIGGER queue_wake_replica AFTER INSERT OR UPDATE ON pgrelay.queue FOR EACH ROW EXECUTE FUNCTION pgrelay._queue_wake_replica();

ALTER TABLE pgrelay.queue ENABLE REPLICA TRIGGER queue_wake_replica;
