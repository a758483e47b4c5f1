-- _ready_direct(p_mode, p_leader): the sql channels (p_kinds '{sql}') that
-- have ready events for direct batches, names only.

CREATE OR REPLACE FUNCTION pgrelay._ready_direct(p_mode text, p_leader boolean) RETURNS SETOF text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT r.channel FROM pgrelay._ready_direct(p_mode, p_leader, '{sql}'::text[]) r
$$;

REVOKE ALL ON FUNCTION pgrelay._ready_direct(text, boolean) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._ready_direct(p_mode text, p_leader boolean) TO pgrelay_processor;

CREATE OR REPLACE FUNCTION pgrelay._ready_direct(p_mode text, p_leader boolean, p_kinds text[]) RETURNS TABLE(channel text, kind text)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool;
  v_own bool;
  v_pending text[];
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, NULL) s;
  v_pending := pgrelay._pending_channels();
  -- A lateral LIMIT 1 in queue_ready's order per channel with rows pending:
  -- the planner would otherwise answer the EXISTS with a hash of the whole
  -- queue.
  RETURN QUERY
  SELECT c.channel, c.kind FROM pgrelay.channels c
   CROSS JOIN LATERAL (
     SELECT 1 FROM pgrelay.queue q
      WHERE q.channel = c.channel AND q.dispatched_at IS NULL AND q.not_before <= now()
        AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
      ORDER BY q.not_before, q.id
      LIMIT 1) r
   WHERE c.channel = ANY (v_pending)
     AND c.kind IN ('sql', 'go') AND c.concurrency_mode = 'none' AND NOT c.paused
     AND c.max_in_flight IS NULL AND c.rate_limit IS NULL
     AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_kinds);
  IF NOT 'sql' = ANY (p_kinds) THEN
    RETURN;
  END IF;
  -- Any ready lane row will do: a hint, checked by the lane batch itself.
  RETURN QUERY
  SELECT ''::text, 'sql'::text FROM pgrelay.queue q
   WHERE q.dispatched_at IS NULL AND q.lane IS NOT NULL AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
     AND EXISTS (SELECT FROM pgrelay.channels c
                  WHERE c.channel = q.channel AND c.kind = 'sql' AND NOT c.paused
                    AND c.concurrency_mode IN ('channel', 'payload')
                    AND c.max_in_flight IS NULL AND c.rate_limit IS NULL)
   LIMIT 1;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._ready_direct(text, boolean, text[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._ready_direct(p_mode text, p_leader boolean, p_kinds text[]) TO pgrelay_processor;
