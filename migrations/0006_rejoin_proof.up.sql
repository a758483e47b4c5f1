-- The rejoin proof: a node that comes back after being dead or adopted asks
-- every other node to answer, and claims the unrestricted rows it owns once
-- every peer has answered (or, for a peer that looks dead here, once
-- --leader-settle has passed, the time rule of before). A node that took the
-- leader lease asks too, and leads once every live peer answered: a take of
-- theirs at the same moment has then reached it.
--
-- Why an answer proves it: a peer's answer is written after the peer applied
-- the ask, which the returning node wrote after its first heartbeat. The
-- peer's adoption of the node's rows, if any, either committed before the
-- answer — and each origin's changes are applied in commit order, so the
-- answer cannot reach the node before the adoption does — or was never made:
-- once the heartbeat is applied there, the peer sees the node alive (an
-- adoption in progress holds the node's row locked, and the heartbeat's apply
-- waits for it). This is what spock.sync_event()/wait_for_sync_event() give
-- (everything the sender committed before its event is applied), with the
-- sending side's call made part of the protocol: it holds on Spock and
-- pglogical alike, whatever the lag.
--
-- Each row is written by one node only (sync_asks by the asker, sync_answers
-- by the answerer), so these replicated tables never conflict.

CREATE TABLE pgrelay.sync_asks (
  node_id  int PRIMARY KEY,
  term     bigint NOT NULL,
  asked_at timestamptz NOT NULL DEFAULT now()
);

-- knows: the nodes the answerer knew when it answered (its pgrelay.nodes rows
-- of nodes that may adopt): a node that joined while the asker was away may be
-- unknown to the asker, which must hear from it too.
CREATE TABLE pgrelay.sync_answers (
  node_id     int NOT NULL,
  peer        int NOT NULL,
  term        bigint NOT NULL,
  knows       int[] NOT NULL,
  answered_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (node_id, peer)
);

-- _adopters: the nodes of this node's pgrelay.nodes that may adopt work:
-- every node but the lease row, decommissioned nodes and single-mode nodes
-- (as _adopt picks its adopter, less the liveness a stale copy cannot tell).
CREATE FUNCTION pgrelay._adopters() RETURNS int[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(pg_catalog.array_agg(n.node_id ORDER BY n.node_id), '{}')
    FROM pgrelay.nodes n
   WHERE n.node_id >= 0 AND n.decommissioned_at IS NULL AND n.mode <> 'single'
$$;

-- _sync_ask: this node asks every other node to answer; returns the term to
-- wait for.
CREATE FUNCTION pgrelay._sync_ask() RETURNS bigint
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
  INSERT INTO pgrelay.sync_asks AS a (node_id, term) VALUES (pgrelay._this_node(), 1)
  ON CONFLICT (node_id) DO UPDATE SET term = a.term + 1, asked_at = now()
  RETURNING a.term
$$;

-- _sync_answer: this node answers the asks of other nodes it has not answered
-- yet (a heartbeat's work; it writes nothing when there is nothing new).
-- Returns how many it answered.
CREATE FUNCTION pgrelay._sync_answer() RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_node int := pgrelay._this_node();
  n int;
BEGIN
  INSERT INTO pgrelay.sync_answers AS s (node_id, peer, term, knows)
  SELECT a.node_id, v_node, a.term, pgrelay._adopters()
    FROM pgrelay.sync_asks a
   WHERE a.node_id <> v_node
     AND NOT EXISTS (SELECT FROM pgrelay.sync_answers x
                      WHERE x.node_id = a.node_id AND x.peer = v_node AND x.term >= a.term)
  ON CONFLICT (node_id, peer) DO UPDATE
    SET term = EXCLUDED.term, knows = EXCLUDED.knows, answered_at = now()
    WHERE s.term < EXCLUDED.term;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

-- _sync_peers: the peers this node must hear from after its ask of term
-- p_term, whether each answered, and whether it looks alive here (a heartbeat
-- within p_dead_after). The peers: the nodes this node knows may adopt, those
-- its answerers knew, less itself and the nodes it knows decommissioned. No
-- row when there is no peer at all: then nothing is proven (a node that came
-- back may not know yet who adopted its work).
CREATE FUNCTION pgrelay._sync_peers(p_term bigint, p_dead_after interval)
RETURNS TABLE (peer int, answered bool, alive bool)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  WITH me AS (SELECT pgrelay._this_node() AS node),
  answered AS (
    SELECT s.peer, s.knows FROM pgrelay.sync_answers s, me
     WHERE s.node_id = me.node AND s.term >= p_term
  ), peers AS (
    SELECT p.node FROM pg_catalog.unnest(pgrelay._adopters()) AS p(node)
    UNION
    SELECT k.node FROM answered a, pg_catalog.unnest(a.knows) AS k(node)
    UNION
    SELECT a.peer FROM answered a
  )
  SELECT p.node,
         EXISTS (SELECT FROM answered a WHERE a.peer = p.node),
         EXISTS (SELECT FROM pgrelay.nodes n WHERE n.node_id = p.node AND n.last_seen >= now() - p_dead_after)
    FROM peers p, me
   WHERE p.node <> me.node
     AND NOT EXISTS (SELECT FROM pgrelay.nodes d WHERE d.node_id = p.node AND d.decommissioned_at IS NOT NULL)
   ORDER BY p.node
$$;

REVOKE ALL ON pgrelay.sync_asks, pgrelay.sync_answers FROM PUBLIC;
REVOKE ALL ON FUNCTION pgrelay._adopters(), pgrelay._sync_ask(), pgrelay._sync_answer(),
  pgrelay._sync_peers(bigint, interval) FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON pgrelay.sync_asks, pgrelay.sync_answers TO pgrelay_processor;
GRANT SELECT ON pgrelay.sync_asks, pgrelay.sync_answers TO pgrelay_admin;
GRANT EXECUTE ON FUNCTION pgrelay._adopters(), pgrelay._sync_ask(), pgrelay._sync_answer(),
  pgrelay._sync_peers(bigint, interval) TO pgrelay_processor;
