-- _lane_of and _phash_of: a queue row's serialisation key (lane) under its
-- channel's concurrency_mode, and its deduplication hash (phash), from its
-- payload. The one statement of each, for the stamping trigger and for
-- update(), which re-derives them when the channel's settings change (and
-- _enqueue_dedup looks rows up by the hash). Inlined like _may_take
-- (LANGUAGE sql, no SET clause, SQL standard body).

CREATE OR REPLACE FUNCTION pgrelay._lane_of(p_concurrency_mode text, p_payload text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE p_concurrency_mode
         WHEN 'channel' THEN 0
         WHEN 'payload' THEN pg_catalog.hashtextextended(p_payload, 0)
       END;

REVOKE ALL ON FUNCTION pgrelay._lane_of(text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
