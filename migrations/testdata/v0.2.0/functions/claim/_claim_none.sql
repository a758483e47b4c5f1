-- _claim_none: the claim of a 'none' channel's events, for _claim: the
-- ready rows in the order of their priority (then due time and id), as many
-- as the channel's limits allow. (A Processor claims again once the
-- outcomes it wrote free a place.)

CREATE OR REPLACE FUNCTION pgrelay._claim_none(p_processor bigint, ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_limit integer) RETURNS TABLE(id bigint, origin_id bigint, channel text, payload text, attempt integer, enqueued_at timestamp with time zone, dispatched_at timestamp with time zone, expired boolean, kind text, handler text, concurrency_mode text, timeout_ms bigint, max_attempts integer)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
  v_limited bool := ch.max_in_flight IS NOT NULL OR ch.rate_limit IS NOT NULL;
  v_limit int := p_limit;
  v_got int;
BEGIN
  IF v_limited THEN
    v_limit := pgrelay._claim_allowance(ch, p_node, p_all, p_own, p_limit);
    IF v_limit <= 0 THEN
      RETURN;
    END IF;
  END IF;
  IF NOT pgrelay._claim_prioritised(ch.channel) THEN
    RETURN QUERY
    WITH cand AS (
      SELECT q.id
        FROM pgrelay.queue q
       WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.not_before <= now()
         AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
       ORDER BY q.not_before, q.id
       LIMIT v_limit
       FOR UPDATE SKIP LOCKED
    ), upd AS (
      -- By primary key whatever the plan: a join with cand in a generic plan
      -- (which guesses LIMIT at a tenth of the channel) hashes a scan of the
      -- whole queue.
      UPDATE pgrelay.queue q
         SET dispatched_at = now(), dispatched_by = p_processor
       WHERE q.id = ANY (ARRAY(SELECT cand.id FROM cand))
      RETURNING q.*
    )
    SELECT u.id, u.origin_id, u.channel, u.payload, u.attempt, u.enqueued_at,
           u.dispatched_at, COALESCE(u.expires_at <= now(), false), ch.kind, ch.handler,
           ch.concurrency_mode, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint,
           ch.max_attempts
      FROM upd u
     ORDER BY u.not_before, u.id;
    GET DIAGNOSTICS v_got = ROW_COUNT;
  ELSE
    RETURN QUERY
    WITH upd AS (
      UPDATE pgrelay.queue q
         SET dispatched_at = now(), dispatched_by = p_processor
       WHERE q.id = ANY (ARRAY(SELECT pgrelay._claim_pick(ch.channel, p_node, p_all, p_own, v_limit)))
      RETURNING q.*
    )
    SELECT u.id, u.origin_id, u.channel, u.payload, u.attempt, u.enqueued_at,
           u.dispatched_at, COALESCE(u.expires_at <= now(), false), ch.kind, ch.handler,
           ch.concurrency_mode, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint,
           ch.max_attempts
      FROM upd u
     ORDER BY u.priority DESC, u.not_before, u.id;
    GET DIAGNOSTICS v_got = ROW_COUNT;
  END IF;
  IF ch.rate_limit IS NOT NULL THEN
    PERFORM pgrelay._claim_started(ch.channel, v_got);
  END IF;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_none(bigint, pgrelay.channels, integer, boolean, boolean, integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_none(p_processor bigint, ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_limit integer) TO pgrelay_processor;
