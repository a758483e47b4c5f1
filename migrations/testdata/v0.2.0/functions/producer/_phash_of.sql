CREATE OR REPLACE FUNCTION pgrelay._phash_of(p_deduplicate bool, p_payload text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_deduplicate THEN pg_catalog.hashtextextended(p_payload, 0) END;

REVOKE ALL ON FUNCTION pgrelay._phash_of(boolean, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
