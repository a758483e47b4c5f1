-- _may_take: whether node p_node may take a row pinned to p_run_in_node
-- (NULL: unrestricted) and owned by p_owner_node, given its _claim_scope
-- (p_all, p_own): a row pinned to it always; an unrestricted row of any
-- owner with p_all; one it owns with p_own. The one statement of the rule,
-- in every claim's query (and in a lane's in-flight check).
--
-- LANGUAGE sql without a SET clause, so that the planner inlines it into
-- each query as if written out: a filter beside the index conditions, never
-- a function call per row (the EXPLAIN tests check the plans). A SET
-- search_path would forbid inlining, and none is needed: the body is an SQL
-- standard one (RETURN), bound to pg_catalog's operators when the migration
-- created it under pgrelay's search_path, and inlined it runs in its caller,
-- whose search_path is pinned.

CREATE OR REPLACE FUNCTION pgrelay._may_take(p_run_in_node int, p_owner_node int, p_node int, p_all bool, p_own bool)
RETURNS bool
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_run_in_node = p_node OR (p_run_in_node IS NULL AND (p_all OR (p_own AND p_owner_node = p_node)));

REVOKE ALL ON FUNCTION pgrelay._may_take(integer, integer, integer, boolean, boolean) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._may_take(p_run_in_node integer, p_owner_node integer, p_node integer, p_all boolean, p_own boolean) TO pgrelay_processor;
