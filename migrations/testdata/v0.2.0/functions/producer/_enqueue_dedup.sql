-- _enqueue_dedup: the deduplicating insert of one payload, due at p_due
-- (NULL: now). A pending row with the same payload absorbs the call: its
-- origin id is returned and the suppressed call is logged as 'deduplicated'
-- under a fresh id, with queue_id naming the row that absorbed it and the
-- call's priority (which the absorbing row does not take). The
-- absorbing row stands for the call, so it must run after the notifying
-- transaction commits, or the handler misses that transaction's change.
--
-- Only a row due at the same time absorbs: an immediate notify is absorbed
-- by an immediate row or a retry, and by a delayed row only once its time has
-- come (never one still waiting: that would make the notify wait). A delayed
-- notify is absorbed only by a delayed row with exactly the same not_before
-- (never an earlier or immediate row, which would run it early, nor a
-- retry). A delayed row is told by retry_of IS NULL AND not_before >
-- enqueued_at (immediate first attempts have not_before = enqueued_at;
-- retries carry retry_of).
--
-- The match is locked FOR SHARE SKIP LOCKED until the notifying transaction
-- ends. Every claim takes a row FOR UPDATE SKIP LOCKED (a lane's head
-- included), so it passes over a row a producer holds, and a row a claim or
-- a direct batch holds (it may be running its handler right now) absorbs
-- nothing: the notify gets a row of its own. FOR SHARE, not FOR KEY SHARE:
-- FOR KEY SHARE is granted on a row that a claim updated and committed after
-- the producer's snapshot, without reading it again, so the producer could
-- absorb into a row already claimed; FOR SHARE conflicts with that update,
-- so the row is read again (READ COMMITTED: no longer pending, not absorbed)
-- or the producer fails with a serialisation failure (REPEATABLE READ).

CREATE OR REPLACE FUNCTION pgrelay._enqueue_dedup(ch pgrelay.channels, p_payload text, p_due timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_hash bigint := pgrelay._phash_of(true, p_payload);
  v_row record;
  v_id bigint;
BEGIN
  -- Two producers notifying the same payload at once: the second waits for the
  -- first to commit, then sees its row. They meet on the payload's slot row.
  PERFORM FROM pgrelay.dedup_locks d
   WHERE d.slot = (pg_catalog.hashtext(ch.channel) # pg_catalog.hashint8(v_hash)) & 4095
     FOR NO KEY UPDATE;
  SELECT q.id, q.origin_id, q.attempt INTO v_row
    FROM pgrelay.queue q
   WHERE q.channel = ch.channel AND q.phash = v_hash AND q.dispatched_at IS NULL
     AND q.payload = p_payload
     AND (NOT ch.node_restricted OR q.run_in_node = v_node)
     AND CASE WHEN p_due IS NULL
              -- Due now: an immediate row, a retry, or a delayed row whose time has come.
              THEN q.retry_of IS NOT NULL OR q.not_before <= GREATEST(q.enqueued_at, now())
              -- Delayed: a delayed row due at the same time.
              ELSE q.retry_of IS NULL AND q.not_before = p_due
         END
   ORDER BY q.origin_id
   LIMIT 1
     FOR SHARE OF q SKIP LOCKED;
  IF FOUND THEN
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, node, priority)
    VALUES (v_row.id, pgrelay._next_id(), ch.channel, v_row.attempt, 'deduplicated', v_node,
            NULLIF(ch.priority, 0));
    RETURN v_row.origin_id;
  END IF;
  v_id := pgrelay._next_id();
  PERFORM pgrelay._enqueue(ch, ARRAY[v_id], ARRAY[p_payload], p_due);
  RETURN v_id;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._enqueue_dedup(pgrelay.channels, text, timestamp with time zone) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
