-- The enqueued event: a channel registered or updated with
-- p_publish_enqueued logs an 'enqueued' row for each event it accepts, so
-- that a subscriber on NATS sees an event's whole life, from enqueued to its
-- outcome. The row is written in the transaction that enqueues the event,
-- set-based for a batch (not read back from the queue later: a queue row is
-- deleted when its event ends, often before the publisher looks), so it
-- commits or rolls back with the event, and its log id, drawn on the same
-- node before any attempt could start, is below every outcome row that node
-- writes for the event.
--
-- What writes it: _enqueue (notify(), notify_many(), delayed events, the
-- first call of a deduplicating channel, and so the notifier's send()), and
-- the queue_after_insert trigger for direct inserts into pgrelay.queue.
-- Not: a retry row after a failed attempt (its event was enqueued before), a
-- deduplicated call (it logs 'deduplicated'), a dead letter retried by an
-- admin (it logs 'retried', the new chain's first row).
--
-- A channel without the setting pays one test of a field of the channel row
-- _check_notify already read; the trigger, which the producer functions'
-- inserts pass over, joins the statement's rows with their channels once.

ALTER TABLE pgrelay.channels ADD COLUMN publish_enqueued boolean NOT NULL DEFAULT false;

ALTER TABLE pgrelay.log DROP CONSTRAINT log_event;
ALTER TABLE pgrelay.log ADD CONSTRAINT log_event
  CHECK (event IN ('succeeded', 'failed', 'gave_up', 'expired', 'deduplicated', 'adopted', 'rescued',
                   'retried', 'discarded', 'enqueued'));

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
                             expires_at, lane, phash)
  SELECT u.id, u.id, ch.channel, u.payload, v_node, pgrelay._pin_of(ch.node_restricted, v_node), v_due,
         pgrelay._expiry_of(ch.expire_after, now(), v_due),
         pgrelay._lane_of(ch.concurrency_mode, u.payload), pgrelay._phash_of(ch.deduplicate, u.payload)
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

-- Direct inserts: rows that start an event (retry_of NULL) of channels with
-- the setting, in the statement's id order. Retry rows carry retry_of.
CREATE OR REPLACE FUNCTION pgrelay._queue_after_insert() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_first text;
  v_last text;
  v_channel text;
BEGIN
  INSERT INTO pgrelay.event_payloads (queue_id, payload)
  SELECT n.id, n.payload
    FROM new_rows n
    JOIN pgrelay.channels c ON c.channel = n.channel
   WHERE c.publish_payload
  ON CONFLICT (queue_id) DO NOTHING;
  INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event)
  SELECT n.id, n.origin_id, n.channel, n.attempt, 'enqueued'
    FROM new_rows n
    JOIN pgrelay.channels c ON c.channel = n.channel
   WHERE c.publish_enqueued AND n.retry_of IS NULL
   ORDER BY n.id;
  SELECT min(n.channel), max(n.channel) INTO v_first, v_last FROM new_rows n;
  IF v_first IS NULL THEN
    RETURN NULL;
  END IF;
  IF v_first = v_last THEN
    PERFORM pgrelay._wake(v_first);
  ELSE
    FOR v_channel IN SELECT DISTINCT n.channel FROM new_rows n LOOP
      PERFORM pgrelay._wake(v_channel);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;

-- register, update and create_channel gain p_publish_enqueued, last. A new
-- parameter makes a new function: each is created beside the old one, takes
-- its owner and grants, and the old one is dropped.

CREATE FUNCTION pgrelay.register(
  p_channel text,
  p_handler text,
  p_kind text DEFAULT 'sql',
  p_concurrency_mode text DEFAULT 'none',
  p_deduplicate bool DEFAULT false,
  p_node_restricted bool DEFAULT false,
  p_max_attempts int DEFAULT 5,
  p_retry_delay interval DEFAULT '1 second',
  p_expire_after interval DEFAULT NULL,
  p_timeout interval DEFAULT '30 seconds',
  p_publish_payload bool DEFAULT false,
  p_publish_errors text DEFAULT 'class',
  p_publish_enqueued bool DEFAULT false
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  c pgrelay.channels;
  old pgrelay.channels;
  v_diff text[] := '{}';
BEGIN
  c.channel := p_channel;
  c.handler := p_handler;
  c.kind := p_kind;
  c.concurrency_mode := p_concurrency_mode;
  c.deduplicate := COALESCE(p_deduplicate, false);
  c.node_restricted := COALESCE(p_node_restricted, false);
  c.max_attempts := p_max_attempts;
  c.retry_delay := p_retry_delay;
  c.expire_after := p_expire_after;
  c.timeout := p_timeout;
  c.publish_payload := COALESCE(p_publish_payload, false);
  c.publish_errors := p_publish_errors;
  c.publish_enqueued := COALESCE(p_publish_enqueued, false);
  PERFORM pgrelay._check_channel(c);
  LOOP
    INSERT INTO pgrelay.channels (channel, handler, kind, concurrency_mode, deduplicate,
                                  node_restricted, max_attempts, retry_delay, expire_after, timeout,
                                  publish_payload, publish_errors, publish_enqueued)
    VALUES (c.channel, c.handler, c.kind, c.concurrency_mode, c.deduplicate,
            c.node_restricted, c.max_attempts, c.retry_delay, c.expire_after, c.timeout,
            c.publish_payload, c.publish_errors, c.publish_enqueued)
    ON CONFLICT (channel) DO NOTHING;
    IF FOUND THEN
      RETURN;
    END IF;
    SELECT * INTO old FROM pgrelay.channels x WHERE x.channel = p_channel;
    EXIT WHEN FOUND;
    -- Unregistered between the two statements: insert again.
  END LOOP;
  IF old.handler IS DISTINCT FROM c.handler THEN
    v_diff := v_diff || pg_catalog.format('handler (%s registered, %s given)',
      pg_catalog.quote_literal(old.handler), pg_catalog.quote_literal(c.handler));
  END IF;
  IF old.kind IS DISTINCT FROM c.kind THEN
    v_diff := v_diff || pg_catalog.format('kind (%s registered, %s given)', old.kind, c.kind);
  END IF;
  IF old.concurrency_mode IS DISTINCT FROM c.concurrency_mode THEN
    v_diff := v_diff || pg_catalog.format('concurrency_mode (%s registered, %s given)',
      old.concurrency_mode, c.concurrency_mode);
  END IF;
  IF old.deduplicate IS DISTINCT FROM c.deduplicate THEN
    v_diff := v_diff || pg_catalog.format('deduplicate (%s registered, %s given)', old.deduplicate, c.deduplicate);
  END IF;
  IF old.node_restricted IS DISTINCT FROM c.node_restricted THEN
    v_diff := v_diff || pg_catalog.format('node_restricted (%s registered, %s given)',
      old.node_restricted, c.node_restricted);
  END IF;
  IF old.max_attempts IS DISTINCT FROM c.max_attempts THEN
    v_diff := v_diff || pg_catalog.format('max_attempts (%s registered, %s given)', old.max_attempts, c.max_attempts);
  END IF;
  IF old.retry_delay IS DISTINCT FROM c.retry_delay THEN
    v_diff := v_diff || pg_catalog.format('retry_delay (%s registered, %s given)', old.retry_delay, c.retry_delay);
  END IF;
  IF old.expire_after IS DISTINCT FROM c.expire_after THEN
    v_diff := v_diff || pg_catalog.format('expire_after (%s registered, %s given)',
      COALESCE(old.expire_after::text, 'NULL'), COALESCE(c.expire_after::text, 'NULL'));
  END IF;
  IF old.timeout IS DISTINCT FROM c.timeout THEN
    v_diff := v_diff || pg_catalog.format('timeout (%s registered, %s given)', old.timeout, c.timeout);
  END IF;
  IF old.publish_payload IS DISTINCT FROM c.publish_payload THEN
    v_diff := v_diff || pg_catalog.format('publish_payload (%s registered, %s given)',
      old.publish_payload, c.publish_payload);
  END IF;
  IF old.publish_errors IS DISTINCT FROM c.publish_errors THEN
    v_diff := v_diff || pg_catalog.format('publish_errors (%s registered, %s given)',
      old.publish_errors, c.publish_errors);
  END IF;
  IF old.publish_enqueued IS DISTINCT FROM c.publish_enqueued THEN
    v_diff := v_diff || pg_catalog.format('publish_enqueued (%s registered, %s given)',
      old.publish_enqueued, c.publish_enqueued);
  END IF;
  IF pg_catalog.cardinality(v_diff) > 0 THEN
    RAISE EXCEPTION 'pgrelay: channel % already exists with a different definition: %',
      pg_catalog.quote_literal(p_channel), pg_catalog.array_to_string(v_diff, ', ')
      USING ERRCODE = 'PR003',
            HINT = 'Use pgrelay.update() to change it; registering an identical definition again is a no-op.';
  END IF;
END
$$;

CREATE FUNCTION pgrelay.update(
  p_channel text,
  p_handler text DEFAULT NULL,
  p_kind text DEFAULT NULL,
  p_concurrency_mode text DEFAULT NULL,
  p_deduplicate bool DEFAULT NULL,
  p_node_restricted bool DEFAULT NULL,
  p_max_attempts int DEFAULT NULL,
  p_retry_delay interval DEFAULT NULL,
  p_expire_after interval DEFAULT NULL,
  p_timeout interval DEFAULT NULL,
  p_paused bool DEFAULT NULL,
  p_publish_payload bool DEFAULT NULL,
  p_publish_errors text DEFAULT NULL,
  p_publish_enqueued bool DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  old pgrelay.channels;
  c pgrelay.channels;
BEGIN
  PERFORM pgrelay._lock_channel_exclusive(p_channel);
  SELECT * INTO old FROM pgrelay.channels x WHERE x.channel = p_channel FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay: unknown channel %', COALESCE(pg_catalog.quote_literal(p_channel), 'NULL')
      USING ERRCODE = 'PR001';
  END IF;
  c := old;
  c.handler := COALESCE(p_handler, old.handler);
  c.kind := COALESCE(p_kind, old.kind);
  c.concurrency_mode := COALESCE(p_concurrency_mode, old.concurrency_mode);
  c.deduplicate := COALESCE(p_deduplicate, old.deduplicate);
  c.node_restricted := COALESCE(p_node_restricted, old.node_restricted);
  c.max_attempts := COALESCE(p_max_attempts, old.max_attempts);
  c.retry_delay := COALESCE(p_retry_delay, old.retry_delay);
  c.expire_after := CASE WHEN p_expire_after IS NULL THEN old.expire_after
                         WHEN p_expire_after = interval '0' THEN NULL
                         ELSE p_expire_after END;
  c.timeout := COALESCE(p_timeout, old.timeout);
  c.paused := COALESCE(p_paused, old.paused);
  c.publish_payload := COALESCE(p_publish_payload, old.publish_payload);
  c.publish_errors := COALESCE(p_publish_errors, old.publish_errors);
  c.publish_enqueued := COALESCE(p_publish_enqueued, old.publish_enqueued);
  -- The handler is re-checked only when it or the kind changes: pausing a
  -- channel whose handler's function was dropped must still work.
  PERFORM pgrelay._check_channel(c, c.handler IS DISTINCT FROM old.handler OR c.kind IS DISTINCT FROM old.kind);
  UPDATE pgrelay.channels x
     SET handler = c.handler, kind = c.kind, concurrency_mode = c.concurrency_mode,
         deduplicate = c.deduplicate, node_restricted = c.node_restricted,
         max_attempts = c.max_attempts, retry_delay = c.retry_delay,
         expire_after = c.expire_after, timeout = c.timeout, paused = c.paused,
         publish_payload = c.publish_payload, publish_errors = c.publish_errors,
         publish_enqueued = c.publish_enqueued, updated_at = now()
   WHERE x.channel = p_channel;
  -- Rows not yet dispatched follow the new settings.
  --
  -- Rows in flight keep their claim, but take the new lane too: a channel
  -- made serialised must count what is already running as its lane's
  -- in-flight row, or the next claim starts a second one beside it. They are
  -- updated whenever a derived setting changes, so that each is locked until
  -- this transaction ends: a completion that comes meanwhile waits, and its
  -- retry row is then derived from the new settings.
  --
  -- A completion that already held a row makes these statements wait, and
  -- the retry row it commits is not in their snapshot: re-derive until a new
  -- snapshot sees no row with the old values. (Producers are held off by the
  -- channel lock; a retry only comes from a row that was visible.)
  IF c.concurrency_mode IS DISTINCT FROM old.concurrency_mode
     OR c.deduplicate IS DISTINCT FROM old.deduplicate
     OR c.node_restricted IS DISTINCT FROM old.node_restricted THEN
    LOOP
      UPDATE pgrelay.queue q
         SET lane = pgrelay._lane_of(c.concurrency_mode, q.payload),
             phash = pgrelay._phash_of(c.deduplicate, q.payload),
             run_in_node = CASE WHEN c.node_restricted THEN COALESCE(q.run_in_node, q.owner_node) END
       WHERE q.channel = p_channel AND q.dispatched_at IS NULL;
      UPDATE pgrelay.queue q
         SET lane = pgrelay._lane_of(c.concurrency_mode, q.payload)
       WHERE q.channel = p_channel AND q.dispatched_at IS NOT NULL;
      EXIT WHEN NOT EXISTS (
        SELECT FROM pgrelay.queue q
         WHERE q.channel = p_channel
           AND (q.lane IS DISTINCT FROM pgrelay._lane_of(c.concurrency_mode, q.payload)
                OR (q.dispatched_at IS NULL
                    AND (q.phash IS DISTINCT FROM pgrelay._phash_of(c.deduplicate, q.payload)
                         OR (q.run_in_node IS NULL) = c.node_restricted))));
    END LOOP;
  END IF;
END
$$;

CREATE FUNCTION pgrelay_notifier.create_channel(
  p_channel text,
  p_from text,
  p_concurrency_mode text DEFAULT 'none',
  p_deduplicate bool DEFAULT false,
  p_node_restricted bool DEFAULT false,
  p_max_attempts int DEFAULT 10,
  p_retry_delay interval DEFAULT '10 seconds',
  p_expire_after interval DEFAULT NULL,
  p_timeout interval DEFAULT '30 seconds',
  p_publish_payload bool DEFAULT false,
  p_publish_errors text DEFAULT 'class',
  p_publish_enqueued bool DEFAULT false
) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgrelay_notifier._check_address('from', p_from);
  PERFORM pgrelay.register(
    p_channel := p_channel,
    p_handler := pg_catalog.btrim(p_from),
    p_kind := 'email',
    p_concurrency_mode := p_concurrency_mode,
    p_deduplicate := p_deduplicate,
    p_node_restricted := p_node_restricted,
    p_max_attempts := p_max_attempts,
    p_retry_delay := p_retry_delay,
    p_expire_after := p_expire_after,
    p_timeout := p_timeout,
    p_publish_payload := p_publish_payload,
    p_publish_errors := p_publish_errors,
    p_publish_enqueued := p_publish_enqueued);
END
$$;

-- Each new function takes the old one's owner and privileges (whatever
-- earlier migrations granted), then the old one goes. A function's new
-- owner needs CREATE on its schema (unless the migrating role is a
-- superuser): pgrelay_notifier has it for this step only, as in 0002.
GRANT CREATE ON SCHEMA pgrelay_notifier TO pgrelay_notifier;
DO $$
DECLARE
  r record;
  g record;
BEGIN
  FOR r IN
    SELECT o.oid AS old_fn, n.oid AS new_fn, o.proowner
      FROM (VALUES
        ('pgrelay.register(text, text, text, text, bool, bool, int, interval, interval, interval, bool, text)',
         'pgrelay.register(text, text, text, text, bool, bool, int, interval, interval, interval, bool, text, bool)'),
        ('pgrelay.update(text, text, text, text, bool, bool, int, interval, interval, interval, bool, bool, text)',
         'pgrelay.update(text, text, text, text, bool, bool, int, interval, interval, interval, bool, bool, text, bool)'),
        ('pgrelay_notifier.create_channel(text, text, text, bool, bool, int, interval, interval, interval, bool, text)',
         'pgrelay_notifier.create_channel(text, text, text, bool, bool, int, interval, interval, interval, bool, text, bool)')
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
REVOKE CREATE ON SCHEMA pgrelay_notifier FROM pgrelay_notifier;
