-- _lane_head: the head of lane p_lane of channel p_channel for node p_node
-- with its _claim_scope (p_all, p_own): the lane's oldest notification
-- (lowest origin_id, then id) among the rows the node may take, and nothing
-- while one of those is in flight. The classic claim (_claim) and the lane
-- batch (_claim_lanes_direct) lock it FOR UPDATE SKIP LOCKED and take it
-- only if it is ready, never the lane's second row.
--
-- Inlined into the caller's query as _may_take is (LANGUAGE sql, STABLE, no
-- SET clause, an SQL standard body bound when created): the planner reads
-- queue_lane in order and stops at the head, as the EXPLAIN tests check.

CREATE OR REPLACE FUNCTION pgrelay._lane_head(p_channel text, p_lane bigint, p_node int, p_all bool, p_own bool)
RETURNS TABLE (id bigint)
LANGUAGE sql STABLE ROWS 1
BEGIN ATOMIC
  SELECT q.id
    FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.lane = p_lane AND q.dispatched_at IS NULL
     AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
     AND NOT EXISTS (
       SELECT FROM pgrelay.queue f
        WHERE f.channel = p_channel AND f.lane = p_lane AND f.dispatched_at IS NOT NULL
          AND pgrelay._may_take(f.run_in_node, f.owner_node, p_node, p_all, p_own))
   ORDER BY q.origin_id, q.id
   LIMIT 1;
END;

REVOKE ALL ON FUNCTION pgrelay._lane_head(text, bigint, integer, boolean, boolean) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._lane_head(p_channel text, p_lane bigint, p_node integer, p_all boolean, p_own boolean) TO pgrelay_processor;
