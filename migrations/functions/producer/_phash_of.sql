-- _phash_of: a queue row's deduplication hash (phash) from its payload, on a
-- deduplicating channel; NULL on the others. The one statement of the rule,
-- for the stamping trigger (_queue_before_insert), _enqueue, _retry_dead and
-- update(), which re-derives it when the channel's settings change;
-- _enqueue_dedup looks rows up by it. Inlined like _may_take (LANGUAGE sql,
-- no SET clause, SQL standard body).

CREATE OR REPLACE FUNCTION pgrelay._phash_of(p_deduplicate bool, p_payload text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_deduplicate THEN pg_catalog.hashtextextended(p_payload, 0) END;

REVOKE ALL ON FUNCTION pgrelay._phash_of(boolean, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
