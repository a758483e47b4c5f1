-- The leader lease of --mode leader moves from one shared row of
-- pgrelay.nodes (node_id = -1), which every node inserted and updated, to a
-- row per node that only that node writes: its bid. The holder is the live
-- bid with the highest term, the lowest node id among equal terms
-- (pgrelay._lease_holder), the same on every node once the bids have
-- replicated. No two nodes write the same row, so two first lease steps at
-- the same moment no longer meet as a duplicate key on a replica.
--
-- The old row and the nodes columns it used (leader_node, term, lease_until,
-- taken_at) stay, read by nothing: deleting the row or dropping the columns
-- could meet changes of them still on their way from another node.
CREATE TABLE pgrelay.leader_leases (
  node_id     int PRIMARY KEY CHECK (node_id BETWEEN 0 AND 1023),
  term        bigint NOT NULL,
  lease_until timestamptz NOT NULL,
  taken_at    timestamptz NOT NULL
);

-- Processors bid, renew and release; the overview (nodes_overview) reads.
GRANT SELECT, INSERT, UPDATE ON pgrelay.leader_leases TO pgrelay_processor;
GRANT SELECT ON pgrelay.leader_leases TO pgrelay_admin, pgrelay_viewer;
