-- Rows that arrive through logical replication fire no ordinary trigger and no
-- NOTIFY crosses nodes: this row trigger, enabled for the replication apply
-- worker only (ENABLE REPLICA), wakes this node's Processors for them, naming
-- the row's channel (_wake_hint). Only for a row they may run (_claim_scope,
-- _may_take): one pinned here; an unrestricted one, unless this node runs in
-- multi-node mode and another node owns it (a leader runs every node's rows;
-- a node whose mode is not recorded yet is woken). Only while the row is
-- unclaimed (the WHEN clause): a claim or a completion made on another node
-- wakes nothing. NOTIFY folds duplicates within a transaction, so a
-- replicated batch costs one wake-up per channel.

CREATE OR REPLACE FUNCTION pgrelay._queue_wake_replica() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
BEGIN
  IF NEW.run_in_node IS NOT NULL THEN
    IF NEW.run_in_node <> v_node THEN
      RETURN NULL;
    END IF;
  ELSIF NEW.owner_node <> v_node
        AND EXISTS (SELECT FROM pgrelay.nodes n WHERE n.node_id = v_node AND n.mode = 'multi-node') THEN
    RETURN NULL;
  END IF;
  PERFORM pg_catalog.pg_notify('pgrelay', pgrelay._wake_hint(NEW.channel));
  RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._queue_wake_replica() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._queue_wake_replica() TO pgrelay_processor;

CREATE OR REPLACE TRIGGER queue_wake_replica AFTER INSERT OR UPDATE ON pgrelay.queue FOR EACH ROW WHEN ((new.dispatched_at IS NULL)) EXECUTE FUNCTION pgrelay._queue_wake_replica();

ALTER TABLE pgrelay.queue ENABLE REPLICA TRIGGER queue_wake_replica;
