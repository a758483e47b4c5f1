-- _claim_kind: what a channel is claimed by in _claim's p_kinds: its kind,
-- but 'go:' || handler for a go channel, so that a Processor names each Go
-- handler it has ('go:charge') and is offered only their channels. The one
-- place of that rule. Inlined into _claim's channel queries (LANGUAGE sql, an
-- SQL standard body bound when created under pgrelay's search_path, no SET
-- clause), as _may_take is.

CREATE OR REPLACE FUNCTION pgrelay._claim_kind(p_kind text, p_handler text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_kind = 'go' THEN 'go:' || p_handler ELSE p_kind END;

REVOKE ALL ON FUNCTION pgrelay._claim_kind(text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_kind(p_kind text, p_handler text) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay._claim_kind(p_kind text, p_handler text) TO pgrelay_processor;
