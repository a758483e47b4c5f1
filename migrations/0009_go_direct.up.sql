-- Direct batches of go channels: the events of a 'none' go channel whose
-- handler a Processor runs in the event's transaction (HandleTx) run as those
-- of a 'none' sql channel do: a transaction locks the ready rows (FOR UPDATE
-- SKIP LOCKED), runs each Go function under a savepoint of its own and
-- completes the events (_complete with p_processor NULL), with one commit and
-- no claim written before. _ready_direct and _claim_direct take the kinds a
-- Processor runs in direct batches, as _claim's p_kinds: 'sql' and
-- 'go:<name>' for each such Go handler it has (_claim_kind); _claim (0010)
-- leaves the 'none' channels of those go kinds to the batches.
-- A Processor that runs no Go handler that way passes none: its sql
-- channels run as before.

-- _claim_direct: as in 0001, for a 'none' channel of kind sql or go whose
-- _claim_kind is in p_kinds; the channel's kind comes with each row.
DROP FUNCTION pgrelay._claim_direct(text, text, bool, bigint, int);
CREATE FUNCTION pgrelay._claim_direct(p_channel text, p_mode text, p_leader bool, p_term bigint, p_limit int,
                                      p_kinds text[] DEFAULT '{sql}')
RETURNS TABLE (id bigint, origin_id bigint, payload text, attempt int, enqueued_at timestamptz,
               expired bool, handler text, timeout_ms bigint, max_attempts int, kind text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool;
  v_own bool;
  ch pgrelay.channels;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  SELECT * INTO ch FROM pgrelay.channels c
   WHERE c.channel = p_channel AND c.kind IN ('sql', 'go') AND c.concurrency_mode = 'none' AND NOT c.paused
     AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_kinds);
  IF NOT FOUND OR p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT q.id, q.origin_id, q.payload, q.attempt, q.enqueued_at, COALESCE(q.expires_at <= now(), false),
         ch.handler, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint, ch.max_attempts, ch.kind
    FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
   ORDER BY q.not_before, q.id
   LIMIT p_limit
     FOR UPDATE OF q SKIP LOCKED;
END
$$;

-- _ready_direct(p_mode, p_leader, p_kinds): as _ready_direct of 0001, for
-- the 'none' channels of kind sql or go whose _claim_kind is in p_kinds, with
-- their kind (a go channel's batch runs Go functions, an sql channel's its
-- statement), and ('', 'sql') when a serialised sql channel has a lane with a
-- row ready (when p_kinds holds 'sql': lane batches are of sql channels only).
-- A new function beside the two-argument one, which Processors of earlier
-- releases call while they run beside a migrated database: that one now
-- reads this one.
CREATE FUNCTION pgrelay._ready_direct(p_mode text, p_leader bool, p_kinds text[])
RETURNS TABLE (channel text, kind text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool;
  v_own bool;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, NULL) s;
  -- A lateral LIMIT 1 in queue_ready's order per channel: the planner would
  -- otherwise answer the EXISTS with a hash of the whole queue.
  RETURN QUERY
  SELECT c.channel, c.kind FROM pgrelay.channels c
   CROSS JOIN LATERAL (
     SELECT 1 FROM pgrelay.queue q
      WHERE q.channel = c.channel AND q.dispatched_at IS NULL AND q.not_before <= now()
        AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
      ORDER BY q.not_before, q.id
      LIMIT 1) r
   WHERE c.kind IN ('sql', 'go') AND c.concurrency_mode = 'none' AND NOT c.paused
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
                    AND c.concurrency_mode IN ('channel', 'payload'))
   LIMIT 1;
END
$$;

-- _ready_direct(p_mode, p_leader): the function above for the sql
-- channels (p_kinds '{sql}'), names only, as in 0001.
CREATE OR REPLACE FUNCTION pgrelay._ready_direct(p_mode text, p_leader bool)
RETURNS SETOF text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT r.channel FROM pgrelay._ready_direct(p_mode, p_leader, '{sql}'::text[]) r
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_direct(text, text, bool, bigint, int, text[]),
  pgrelay._ready_direct(text, bool, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._claim_direct(text, text, bool, bigint, int, text[]),
  pgrelay._ready_direct(text, bool, text[])
  TO pgrelay_processor;
