-- _claim_channel: _claim for p_channel alone, when _claim visits it and it is
-- a 'none' channel (serialised channels need _claim's lanes); nothing
-- otherwise. Its rows are _claim's, the one of a rate-limited channel whose
-- window the claim fills (rate_wait_ms) included.

CREATE OR REPLACE FUNCTION pgrelay._claim_channel(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_channel text, p_kinds text[], p_term bigint DEFAULT NULL::bigint, p_direct boolean DEFAULT false, p_direct_kinds text[] DEFAULT '{}'::text[]) RETURNS TABLE(id bigint, origin_id bigint, channel text, payload text, attempt integer, enqueued_at timestamp with time zone, dispatched_at timestamp with time zone, expired boolean, kind text, handler text, concurrency_mode text, timeout_ms bigint, max_attempts integer, rate_wait_ms bigint)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
  v_all bool;
  v_own bool;
  v_node int := pgrelay._this_node();
  ch pgrelay.channels;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  SELECT * INTO ch FROM pgrelay.channels c
   WHERE c.channel = p_channel AND c.concurrency_mode = 'none'
     AND pgrelay._claim_visits(c, p_kinds, p_direct, p_direct_kinds);
  IF NOT FOUND OR p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT n.*, NULL::bigint FROM pgrelay._claim_none(p_processor, ch, v_node, v_all, v_own, p_limit) n;
  IF ch.rate_limit IS NOT NULL THEN
    RETURN QUERY SELECT * FROM pgrelay._claim_rate_rows(ARRAY[ch.channel], v_node, v_all, v_own);
  END IF;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_channel(bigint, text, boolean, integer, text, text[], bigint, boolean, text[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_channel(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_channel text, p_kinds text[], p_term bigint, p_direct boolean, p_direct_kinds text[]) TO pgrelay_processor;
