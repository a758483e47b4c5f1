-- _enqueue_unique: the insert of one event with a unique key. Concurrent
-- calls of one channel and key meet on a row of dedup_locks, which the call
-- updates (not only locks): the second waits for the first to end, then
-- sees its row; under REPEATABLE READ, whose snapshot would not, it fails
-- with 40001 instead, to be retried. The holder is the lowest id among the
-- rows that hold the key (on a node-restricted channel, those of this
-- node). A held key logs 'deduplicated' (queue_id: the holder, origin_id: a
-- fresh id no caller receives, priority: the call's) and returns the
-- holder's id.
--
-- Each call then trims two of this node's rows whose check time has passed
-- (not those of its own transaction): gone when neither the window nor the
-- event is open, else looked at again a minute later (or at the window's
-- end): the table holds the open keys and at most what the last calls left.
--
-- On a cluster (another node that is not decommissioned and not in single
-- mode is known here), another node may accept the same key before either
-- sees the other's row: the event is held (below, _resolve_keys).

CREATE OR REPLACE FUNCTION pgrelay._enqueue_unique(ch pgrelay.channels, p_key text, p_payload text, p_due timestamp with time zone, p_unique_for interval) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_hash bigint := pg_catalog.hashtextextended(p_key, 0);
  v_holder bigint;
  v_id bigint;
  v_until timestamptz := now() + COALESCE(p_unique_for, interval '0');
  v_hold boolean;
  r record;
BEGIN
  UPDATE pgrelay.dedup_locks d SET slot = d.slot
   WHERE d.slot = (pg_catalog.hashtext(ch.channel) # pg_catalog.hashint8(v_hash)) & 4095;
  SELECT k.origin_id INTO v_holder
    FROM pgrelay.unique_keys k
   WHERE k.channel = ch.channel AND k.key_hash = v_hash AND k.key = p_key
     AND (NOT ch.node_restricted OR k.node = v_node)
     AND (k.until > now() OR pgrelay._event_open(k.origin_id))
   ORDER BY k.origin_id
   LIMIT 1;
  IF FOUND THEN
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, node, priority)
    VALUES (v_holder, pgrelay._next_id(), ch.channel, 1, 'deduplicated', v_node, NULLIF(ch.priority, 0));
    RETURN v_holder;
  END IF;
  v_id := pgrelay._next_id();
  PERFORM pgrelay._enqueue(ch, ARRAY[v_id], ARRAY[p_payload], p_due);
  v_hold := NOT ch.node_restricted
            AND EXISTS (SELECT FROM pgrelay.nodes n
                         WHERE n.node_id >= 0 AND n.node_id <> v_node AND n.decommissioned_at IS NULL
                           AND n.mode <> 'single');
  IF v_hold THEN
    UPDATE pgrelay.queue q SET not_before = 'infinity' WHERE q.id = v_id;
  END IF;
  INSERT INTO pgrelay.unique_keys (origin_id, channel, key_hash, key, until, node, check_at, at, held, due)
  VALUES (v_id, ch.channel, v_hash, p_key, v_until, v_node, v_until, now(), v_hold,
          CASE WHEN v_hold THEN COALESCE(p_due, now()) END);
  FOR r IN
    SELECT k.origin_id, k.until FROM pgrelay.unique_keys k
     WHERE k.node = v_node AND k.check_at < now()
     ORDER BY k.check_at
     LIMIT 2
       FOR UPDATE SKIP LOCKED
  LOOP
    IF r.until <= now() AND NOT pgrelay._event_open(r.origin_id) THEN
      DELETE FROM pgrelay.unique_keys k WHERE k.origin_id = r.origin_id;
    ELSE
      UPDATE pgrelay.unique_keys k SET check_at = GREATEST(r.until, now() + interval '1 minute')
       WHERE k.origin_id = r.origin_id;
    END IF;
  END LOOP;
  RETURN v_id;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._enqueue_unique(pgrelay.channels, text, text, timestamp with time zone, interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
