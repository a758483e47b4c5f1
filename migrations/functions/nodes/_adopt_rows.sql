-- _adopt_rows, as before, and the dead node's schedules: p_adopter owns
-- them now (it fires a tick missed meanwhile once, on its next pass). The
-- node returning settles before it fires anything (the rejoin), by which
-- time the change of owner has reached it.
--
-- An adopter in leader mode takes back the dead node's claims only. The
-- leader runs every node's unrestricted rows and fires every schedule,
-- whoever owns them, and the adopter (the live node with the smallest id)
-- is often not the leader: a new owner for rows the leader may be running
-- and deleting at that moment would reach the leader's node as updates of
-- rows it no longer has (an apply error on Spock) or overwrite its claims
-- (last update wins on the whole row). Nobody touches a claimed row of the
-- dead node until it is taken back. A node in multi-node mode adopts the
-- rest at its next look (every --dead-after).

CREATE OR REPLACE FUNCTION pgrelay._adopt_rows(p_dead integer, p_adopter integer, p_procs bigint[], p_why text) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n int;
  v_claims_only bool := EXISTS (SELECT FROM pgrelay.nodes x WHERE x.node_id = p_adopter AND x.mode = 'leader');
BEGIN
  WITH t AS (
    SELECT q.id, q.origin_id, q.channel, q.attempt, q.priority, q.dispatched_at IS NOT NULL AS was_claimed
      FROM pgrelay.queue q
     WHERE q.run_in_node IS NULL
       AND ((q.owner_node = p_dead AND NOT v_claims_only)
            OR (q.dispatched_at IS NOT NULL AND q.dispatched_by = ANY (p_procs)))
     FOR UPDATE OF q SKIP LOCKED
  ), u AS (
    UPDATE pgrelay.queue q
       SET owner_node = CASE WHEN q.owner_node = p_dead AND NOT v_claims_only THEN p_adopter ELSE q.owner_node END,
           dispatched_at = CASE WHEN q.dispatched_by = ANY (p_procs) THEN NULL ELSE q.dispatched_at END,
           dispatched_by = CASE WHEN q.dispatched_by = ANY (p_procs) THEN NULL ELSE q.dispatched_by END
      FROM t
     WHERE q.id = t.id
    RETURNING q.id
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, priority)
    SELECT t.id, t.origin_id, t.channel, t.attempt, 'adopted',
           pg_catalog.format('%s; adopted by node %s%s', p_why, p_adopter,
                             CASE WHEN t.was_claimed THEN ' (its claim was taken back)' ELSE '' END),
           NULLIF(t.priority, 0)
      FROM t WHERE t.id IN (SELECT u.id FROM u)
     ORDER BY t.id
    RETURNING 1
  )
  SELECT count(*) INTO n FROM lg;
  IF NOT v_claims_only THEN
    UPDATE pgrelay.schedule_defs s SET owner_node = p_adopter WHERE s.owner_node = p_dead;
  END IF;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._adopt_rows(integer, integer, bigint[], text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._adopt_rows(p_dead integer, p_adopter integer, p_procs bigint[], p_why text) TO pgrelay_processor;
