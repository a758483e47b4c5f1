-- The producer's options of issue 30: a priority per event, and unique keys
-- over a period. notify() and notify_many() gain, last, p_priority,
-- p_key and p_unique_for; calls that give none of them take the path of
-- before, with one test of each NULL.
--
-- Priority: p_priority (an int, so that an integer literal reaches it; its
-- range is a smallint's, checked by _priority_of) is stored in
-- queue.priority; NULL takes the channel's default (channels.priority).
-- _enqueue writes it from the channel row it is given, whose priority the
-- caller has set: no helper's signature changes.
--
-- Unique keys: a call that gives p_key or p_unique_for takes its key (the
-- payload when p_key is NULL) and returns the id of the event that holds
-- that key on the channel, if one does, instead of enqueueing. An event
-- holds its key from its call until it has ended and, with p_unique_for,
-- until that period from its call has passed, succeeded or not; an end as
-- gave_up, expired or cancelled releases it at once. The holders are rows of
-- pgrelay.unique_keys, which outlive the event's queue rows and log rows
-- (a window may outlive the log's retention).

CREATE TABLE pgrelay.unique_keys (
  -- The event holding the key (its notify() id; retries keep it).
  origin_id bigint PRIMARY KEY,
  channel   text NOT NULL,
  key_hash  bigint NOT NULL,
  key       text NOT NULL,
  -- The end of the window: the call's now() plus p_unique_for (the call's
  -- now() without it). The key is held while now() < until, or while the
  -- event has a queue row.
  until     timestamptz NOT NULL,
  -- The node that wrote the row; only it trims the row (each row of this
  -- replicated table has one writer; a release by another node is a
  -- delete, which cannot conflict with a delete).
  node      int NOT NULL,
  -- When that node's trim looks at the row next.
  check_at  timestamptz NOT NULL,
  -- The call's now().
  at        timestamptz NOT NULL,
  -- On a cluster (below): the event waits, not_before 'infinity', until its
  -- node knows the other nodes' rows of the key; due is its due time.
  held      boolean NOT NULL DEFAULT false,
  due       timestamptz
);
CREATE INDEX unique_keys_key ON pgrelay.unique_keys (channel, key_hash);
CREATE INDEX unique_keys_check ON pgrelay.unique_keys (node, check_at);
CREATE INDEX unique_keys_held ON pgrelay.unique_keys (origin_id) WHERE held;
REVOKE ALL ON pgrelay.unique_keys FROM PUBLIC;
GRANT SELECT ON pgrelay.unique_keys TO pgrelay_admin;
GRANT SELECT, UPDATE, DELETE ON pgrelay.unique_keys TO pgrelay_processor;

-- _priority_of: p_priority as stored, or PR009.
CREATE FUNCTION pgrelay._priority_of(p_priority int) RETURNS smallint
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF p_priority < -32768 OR p_priority > 32767 THEN
    RAISE EXCEPTION 'pgrelay.notify: p_priority must be between -32768 and 32767, got %', p_priority
      USING ERRCODE = 'PR009', HINT = 'Higher runs first; NULL takes the channel''s default.';
  END IF;
  RETURN p_priority::smallint;
END
$$;

-- _unique_for: p_unique_for checked (PR024): NULL, or more than zero and at
-- most 10 years.
CREATE FUNCTION pgrelay._unique_for(p_unique_for interval) RETURNS interval
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF p_unique_for <= interval '0' OR p_unique_for > interval '3650 days' THEN
    RAISE EXCEPTION 'pgrelay.notify: p_unique_for must be more than zero and at most 3650 days, got %', p_unique_for
      USING ERRCODE = 'PR024';
  END IF;
  RETURN p_unique_for;
END
$$;

-- _event_open: whether the event p_origin_id has a queue row (pending,
-- running or retrying): its first row has its id, later ones carry it as
-- origin_id and a retry_of (queue_retry_origin).
CREATE FUNCTION pgrelay._event_open(p_origin_id bigint) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN EXISTS (SELECT FROM pgrelay.queue q WHERE q.id = p_origin_id)
    OR EXISTS (SELECT FROM pgrelay.queue q WHERE q.origin_id = p_origin_id AND q.retry_of IS NOT NULL);

-- _enqueue: as in 0019, plus the priority of the channel row it is given.
CREATE OR REPLACE FUNCTION pgrelay._enqueue(ch pgrelay.channels, p_ids bigint[], p_payloads text[], p_due timestamptz)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
  v_node int := pgrelay._id_node(p_ids[1]);
  v_due timestamptz := COALESCE(p_due, now());
BEGIN
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'on', true);
  INSERT INTO pgrelay.queue (id, origin_id, channel, payload, owner_node, run_in_node, not_before,
                             expires_at, lane, phash, priority)
  SELECT u.id, u.id, ch.channel, u.payload, v_node, pgrelay._pin_of(ch.node_restricted, v_node), v_due,
         pgrelay._expiry_of(ch.expire_after, now(), v_due),
         pgrelay._lane_of(ch.concurrency_mode, u.payload), pgrelay._phash_of(ch.deduplicate, u.payload),
         ch.priority
    FROM ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_payloads)) AS u(id, payload);
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'off', true);
  PERFORM pgrelay._wake(ch.channel);
  IF ch.publish_payload THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload)
    SELECT u.id, u.payload FROM ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_payloads)) AS u(id, payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  -- One event (notify()) takes its log id from _next_id(), which inlines;
  -- a batch from one _next_ids() call, whose fixed cost (a function of its
  -- own, with a SET clause) would triple the extra work of a single event.
  -- The k-th event gets the k-th log id: enqueued rows in the events' order.
  IF ch.publish_enqueued THEN
    IF pg_catalog.cardinality(p_ids) = 1 THEN
      INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node)
      VALUES (pgrelay._next_id(), p_ids[1], p_ids[1], ch.channel, 1, 'enqueued', v_node);
    ELSE
      INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node)
      SELECT l.id, l.queue_id, l.queue_id, ch.channel, 1, 'enqueued', v_node
        FROM ROWS FROM (pg_catalog.unnest(pgrelay._next_ids(pg_catalog.cardinality(p_ids))),
                        pg_catalog.unnest(p_ids)) AS l(id, queue_id);
    END IF;
  END IF;
END
$$;

-- _enqueue_unique: the insert of one event with a unique key. Concurrent
-- calls of one channel and key meet on a row of dedup_locks, which the call
-- updates (not only locks): the second waits for the first to end, then
-- sees its row; under REPEATABLE READ, whose snapshot would not, it fails
-- with 40001 instead, to be retried. The holder is the lowest id among the
-- rows that hold the key (on a node-restricted channel, those of this
-- node). A held key logs 'deduplicated' (queue_id: the holder, origin_id: a
-- fresh id no caller receives) and returns the holder's id.
--
-- Each call then trims two of this node's rows whose check time has passed
-- (not those of its own transaction): gone when neither the window nor the
-- event is open, else looked at again a minute later (or at the window's
-- end): the table holds the open keys and at most what the last calls left.
--
-- On a cluster (another node that is not decommissioned and not in single
-- mode is known here), another node may accept the same key before either
-- sees the other's row: the event is held (below, _resolve_keys).
CREATE FUNCTION pgrelay._enqueue_unique(ch pgrelay.channels, p_key text, p_payload text, p_due timestamptz,
                                        p_unique_for interval)
RETURNS bigint
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
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, node)
    VALUES (v_holder, pgrelay._next_id(), ch.channel, 1, 'deduplicated', v_node);
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

-- An end as gave_up, expired or cancelled releases the event's key: a row
-- trigger on the log whose WHEN passes over every other row (the
-- burn-down's 'succeeded' rows cost one comparison each). It fires on the
-- node that writes the log row; its delete replicates.
CREATE FUNCTION pgrelay._log_release_key() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  DELETE FROM pgrelay.unique_keys k WHERE k.origin_id = NEW.origin_id;
  RETURN NULL;
END
$$;
CREATE TRIGGER log_release_key AFTER INSERT ON pgrelay.log FOR EACH ROW
  WHEN (NEW.event IN ('gave_up', 'expired', 'cancelled'))
  EXECUTE FUNCTION pgrelay._log_release_key();

-- notify() and notify_many() gain p_priority, p_key and p_unique_for, last.
-- Each is created beside the old one, takes its owner and grants, and the
-- old one is dropped (as in 0019).
CREATE FUNCTION pgrelay.notify(
  p_channel text,
  p_payload text,
  p_not_before timestamptz DEFAULT NULL,
  p_delay interval DEFAULT NULL,
  p_priority int DEFAULT NULL,
  p_key text DEFAULT NULL,
  p_unique_for interval DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  v_id bigint;
  v_due timestamptz;
BEGIN
  IF NOT pgrelay._payload_ok(p_payload) THEN
    PERFORM pgrelay._check_payload(p_channel, p_payload);
  END IF;
  IF p_not_before IS NOT NULL OR p_delay IS NOT NULL THEN
    v_due := pgrelay._due(p_not_before, p_delay);
  END IF;
  IF p_priority IS NOT NULL THEN
    ch.priority := pgrelay._priority_of(p_priority);
  END IF;
  IF p_key IS NOT NULL OR p_unique_for IS NOT NULL THEN
    RETURN pgrelay._enqueue_unique(ch, COALESCE(p_key, p_payload), p_payload, v_due,
                                   pgrelay._unique_for(p_unique_for));
  END IF;
  IF ch.deduplicate THEN
    RETURN pgrelay._enqueue_dedup(ch, p_payload, v_due);
  END IF;
  v_id := pgrelay._next_id();
  PERFORM pgrelay._enqueue(ch, ARRAY[v_id], ARRAY[p_payload], v_due);
  RETURN v_id;
END
$$;

-- notify_many's p_key holds one key per payload (a NULL element: that
-- payload is its key); arrays of different lengths raise PR111.
CREATE FUNCTION pgrelay.notify_many(
  p_channel text,
  p_payloads text[],
  p_not_before timestamptz DEFAULT NULL,
  p_delay interval DEFAULT NULL,
  p_priority int DEFAULT NULL,
  p_key text[] DEFAULT NULL,
  p_unique_for interval DEFAULT NULL
) RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  p text;
  v_ids bigint[];
  v_due timestamptz;
  v_for interval;
  r record;
BEGIN
  IF p_payloads IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify_many: payloads must not be NULL' USING ERRCODE = 'PR005';
  END IF;
  IF EXISTS (SELECT FROM pg_catalog.unnest(p_payloads) AS u(p) WHERE NOT pgrelay._payload_ok(u.p)) THEN
    FOREACH p IN ARRAY p_payloads LOOP
      PERFORM pgrelay._check_payload(p_channel, p);
    END LOOP;
  END IF;
  IF p_not_before IS NOT NULL OR p_delay IS NOT NULL THEN
    v_due := pgrelay._due(p_not_before, p_delay);
  END IF;
  IF p_priority IS NOT NULL THEN
    ch.priority := pgrelay._priority_of(p_priority);
  END IF;
  IF p_key IS NOT NULL OR p_unique_for IS NOT NULL THEN
    IF pg_catalog.cardinality(p_key) <> pg_catalog.cardinality(p_payloads) THEN
      RAISE EXCEPTION 'pgrelay.notify_many: % keys for % payloads', pg_catalog.cardinality(p_key),
        pg_catalog.cardinality(p_payloads) USING ERRCODE = 'PR111',
        HINT = 'Give one key per payload (NULL: the payload is its key).';
    END IF;
    v_for := pgrelay._unique_for(p_unique_for);
    FOR r IN
      SELECT u.payload, u.key
        FROM ROWS FROM (pg_catalog.unnest(p_payloads), pg_catalog.unnest(p_key)) WITH ORDINALITY AS u(payload, key, n)
       ORDER BY u.n
    LOOP
      RETURN NEXT pgrelay._enqueue_unique(ch, COALESCE(r.key, r.payload), r.payload, v_due, v_for);
    END LOOP;
    RETURN;
  END IF;
  IF ch.deduplicate THEN
    FOREACH p IN ARRAY p_payloads LOOP
      RETURN NEXT pgrelay._enqueue_dedup(ch, p, v_due);
    END LOOP;
    RETURN;
  END IF;
  IF pg_catalog.cardinality(p_payloads) = 0 THEN
    RETURN;
  END IF;
  v_ids := pgrelay._next_ids(pg_catalog.cardinality(p_payloads));
  PERFORM pgrelay._enqueue(ch, v_ids, p_payloads, v_due);
  RETURN QUERY SELECT u.id FROM pg_catalog.unnest(v_ids) AS u(id);
END
$$;

DO $$
DECLARE
  r record;
  g record;
BEGIN
  FOR r IN
    SELECT o.oid AS old_fn, n.oid AS new_fn, o.proowner
      FROM (VALUES
        ('pgrelay.notify(text, text, timestamptz, interval)',
         'pgrelay.notify(text, text, timestamptz, interval, int, text, interval)'),
        ('pgrelay.notify_many(text, text[], timestamptz, interval)',
         'pgrelay.notify_many(text, text[], timestamptz, interval, int, text[], interval)')
      ) AS f(old_sig, new_sig)
      JOIN pg_catalog.pg_proc o ON o.oid = f.old_sig::pg_catalog.regprocedure
      JOIN pg_catalog.pg_proc n ON n.oid = f.new_sig::pg_catalog.regprocedure
  LOOP
    EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO %I', r.new_fn::pg_catalog.regprocedure,
                              pg_catalog.pg_get_userbyid(r.proowner));
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', r.new_fn::pg_catalog.regprocedure);
    FOR g IN
      SELECT a.grantee, a.is_grantable
        FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
       WHERE p.oid = r.old_fn AND a.grantee <> p.proowner
    LOOP
      EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', r.new_fn::pg_catalog.regprocedure,
        CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END,
        CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    EXECUTE pg_catalog.format('DROP FUNCTION %s', r.old_fn::pg_catalog.regprocedure);
  END LOOP;
END
$$;

-- Unique keys on a multi-master cluster. Two nodes can accept one key
-- before either sees the other's row, and in multi-node mode each claims
-- only its own rows: a keyed event enqueued while other nodes are known is
-- held (not_before 'infinity'), and its owner node decides it once it knows
-- every other node's rows of ids below it. Every node decides the same way:
-- the survivor is the lowest id among the rows that hold the key; a held
-- event that is not it ends 'deduplicated', its log row naming the survivor,
-- and the survivor is released to its due time.
--
-- What proves that the other nodes' rows below an id are here: each answer
-- to this node's ask (the rejoin proof of 0006) now carries the answering
-- node's horizon, the id below which every transaction of that node has
-- committed or ended (_publish_horizon: ids carry the time they were drawn).
-- The answer was written after those commits, and each node's changes
-- arrive in commit order: when the answer is here, so are they. So a held
-- event whose id is below every peer's latest horizon is decided; while any
-- is not, the node asks again once the peers answered its last ask. A peer
-- that looks dead here (no heartbeat for p_dead_after) does not hold the
-- decision back; a peer whose answers carry no horizon (an older pgrelay,
-- or a horizon its owner cannot read: PR040) proves nothing, and an event
-- held for p_dead_after is then decided with the rows this node has. A long
-- writing transaction on another node holds its horizon back, and so these
-- decisions, as it holds back the NATS publisher.
ALTER TABLE pgrelay.sync_answers ADD COLUMN horizon bigint;

CREATE OR REPLACE FUNCTION pgrelay._sync_answer() RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_horizon bigint;
  n int;
BEGIN
  IF NOT EXISTS (SELECT FROM pgrelay.sync_asks a
                  WHERE a.node_id <> v_node
                    AND NOT EXISTS (SELECT FROM pgrelay.sync_answers x
                                     WHERE x.node_id = a.node_id AND x.peer = v_node AND x.term >= a.term)) THEN
    RETURN 0;
  END IF;
  BEGIN
    v_horizon := pgrelay._publish_horizon();
  EXCEPTION WHEN SQLSTATE 'PR040' THEN
    v_horizon := NULL;
  END;
  INSERT INTO pgrelay.sync_answers AS s (node_id, peer, term, knows, horizon)
  SELECT a.node_id, v_node, a.term, pgrelay._adopters(), v_horizon
    FROM pgrelay.sync_asks a
   WHERE a.node_id <> v_node
     AND NOT EXISTS (SELECT FROM pgrelay.sync_answers x
                      WHERE x.node_id = a.node_id AND x.peer = v_node AND x.term >= a.term)
  ON CONFLICT (node_id, peer) DO UPDATE
    SET term = EXCLUDED.term, knows = EXCLUDED.knows, horizon = EXCLUDED.horizon, answered_at = now()
    WHERE s.term < EXCLUDED.term;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

-- _resolve_keys: decides this node's held events that it can (those it
-- owns: an adopter decides the ones it adopted), asks again when some wait
-- and the peers answered the last ask; returns how many it decided. A
-- Processor's heartbeat calls it (multi-node and leader mode).
CREATE FUNCTION pgrelay._resolve_keys(p_dead_after interval) RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_term bigint;
  v_proven bigint;
  v_waiting boolean := false;
  v_survivor bigint;
  h record;
  n int := 0;
BEGIN
  IF NOT EXISTS (SELECT FROM pgrelay.unique_keys k WHERE k.held) THEN
    RETURN 0;
  END IF;
  SELECT a.term INTO v_term FROM pgrelay.sync_asks a WHERE a.node_id = v_node;
  -- The lowest horizon of the live peers (NULL when one has none); every
  -- id when there is no peer.
  SELECT CASE WHEN bool_and(s.horizon IS NOT NULL) THEN min(s.horizon) END INTO v_proven
    FROM pgrelay._sync_peers(COALESCE(v_term, 0), p_dead_after) p
    LEFT JOIN pgrelay.sync_answers s ON s.node_id = v_node AND s.peer = p.peer
   WHERE p.alive
  HAVING count(*) > 0;
  IF NOT FOUND THEN
    v_proven := 9223372036854775807;
  END IF;
  FOR h IN
    SELECT u.* FROM pgrelay.unique_keys u
      JOIN pgrelay.queue q ON q.id = u.origin_id
     WHERE u.held AND q.owner_node = v_node AND q.dispatched_at IS NULL
     ORDER BY u.origin_id
       FOR UPDATE OF u, q
  LOOP
    IF NOT COALESCE(h.origin_id < v_proven, h.at < now() - p_dead_after) THEN
      v_waiting := true;
      CONTINUE;
    END IF;
    SELECT min(x.origin_id) INTO v_survivor
      FROM pgrelay.unique_keys x
     WHERE x.channel = h.channel AND x.key_hash = h.key_hash AND x.key = h.key
       AND (x.until > now() OR pgrelay._event_open(x.origin_id));
    IF v_survivor = h.origin_id THEN
      UPDATE pgrelay.queue q SET not_before = h.due WHERE q.id = h.origin_id;
      UPDATE pgrelay.unique_keys x SET held = false, due = NULL WHERE x.origin_id = h.origin_id;
    ELSE
      DELETE FROM pgrelay.queue q WHERE q.id = h.origin_id;
      DELETE FROM pgrelay.unique_keys x WHERE x.origin_id = h.origin_id;
      INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node)
      VALUES (h.origin_id, h.origin_id, h.channel, 1, 'deduplicated',
              pg_catalog.format('deduplicated: event %s holds the key (the lowest id of its key across the cluster)',
                                v_survivor), v_node);
    END IF;
    n := n + 1;
  END LOOP;
  IF v_waiting AND (v_term IS NULL OR NOT EXISTS (
        SELECT FROM pgrelay._sync_peers(v_term, p_dead_after) p WHERE p.alive AND NOT p.answered)) THEN
    PERFORM pgrelay._sync_ask();
  END IF;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._priority_of(int), pgrelay._unique_for(interval), pgrelay._event_open(bigint),
  pgrelay._enqueue_unique(pgrelay.channels, text, text, timestamptz, interval), pgrelay._log_release_key(),
  pgrelay._resolve_keys(interval)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._resolve_keys(interval), pgrelay._event_open(bigint) TO pgrelay_processor;
