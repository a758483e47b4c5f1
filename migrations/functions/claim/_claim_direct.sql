-- Direct batches: a limited channel is not theirs; a 'none' channel with
-- priorities takes its rows in their order.
--
-- Planned once per session (plan_cache_mode): the plan cache would make a
-- custom plan of the claim at every batch (about 0.3 ms of planning for a
-- batch of a few hundred events, TestClaimDirectPlannedOnce); the generic plan
-- is the one TestExplainBatchClaimPlans checks. The channel's timeout in
-- milliseconds is computed once, not for each row (numeric arithmetic, about
-- a tenth of the claim's server CPU).

CREATE OR REPLACE FUNCTION pgrelay._claim_direct(p_channel text, p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_kinds text[] DEFAULT '{sql}'::text[]) RETURNS TABLE(id bigint, origin_id bigint, payload text, attempt integer, enqueued_at timestamp with time zone, expired boolean, handler text, timeout_ms bigint, max_attempts integer, kind text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool;
  v_own bool;
  ch pgrelay.channels;
  v_timeout_ms bigint;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  SELECT * INTO ch FROM pgrelay.channels c
   WHERE c.channel = p_channel AND c.kind IN ('sql', 'go') AND c.concurrency_mode = 'none' AND NOT c.paused
     AND c.max_in_flight IS NULL AND c.rate_limit IS NULL
     AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_kinds);
  IF NOT FOUND OR p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  v_timeout_ms := (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint;
  IF pgrelay._claim_prioritised(p_channel) THEN
    RETURN QUERY
    SELECT q.id, q.origin_id, q.payload, q.attempt, q.enqueued_at, COALESCE(q.expires_at <= now(), false),
           ch.handler, v_timeout_ms, ch.max_attempts, ch.kind
      FROM pgrelay.queue q
     WHERE q.id = ANY (ARRAY(SELECT pgrelay._claim_pick(p_channel, v_node, v_all, v_own, p_limit)))
     ORDER BY q.priority DESC, q.not_before, q.id;
    RETURN;
  END IF;
  RETURN QUERY
  SELECT q.id, q.origin_id, q.payload, q.attempt, q.enqueued_at, COALESCE(q.expires_at <= now(), false),
         ch.handler, v_timeout_ms, ch.max_attempts, ch.kind
    FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
   ORDER BY q.not_before, q.id
   LIMIT p_limit
     FOR UPDATE OF q SKIP LOCKED;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_direct(text, text, boolean, bigint, integer, text[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_direct(p_channel text, p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_kinds text[]) TO pgrelay_processor;
