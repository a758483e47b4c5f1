-- _may_adopt: node row n may adopt work, alive or not: a node (not the lease
-- row), not decommissioned, not in single mode.

CREATE OR REPLACE FUNCTION pgrelay._may_adopt(n pgrelay.nodes) RETURNS bool
LANGUAGE sql STABLE
RETURN n.node_id >= 0 AND n.decommissioned_at IS NULL AND n.mode <> 'single';

REVOKE ALL ON FUNCTION pgrelay._may_adopt(pgrelay.nodes) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._may_adopt(n pgrelay.nodes) TO pgrelay_processor;
