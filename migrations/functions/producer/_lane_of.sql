-- _lane_of: a queue row's serialisation key (lane) under its channel's
-- concurrency_mode, from its payload. The one statement of the rule, for the
-- stamping trigger (_queue_before_insert), _enqueue, _retry_dead and
-- update(), which re-derives it when the channel's settings change. Inlined like _may_take (LANGUAGE sql, no SET clause, SQL
-- standard body).

CREATE OR REPLACE FUNCTION pgrelay._lane_of(p_concurrency_mode text, p_payload text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE p_concurrency_mode
         WHEN 'channel' THEN 0
         WHEN 'payload' THEN pg_catalog.hashtextextended(p_payload, 0)
       END;

REVOKE ALL ON FUNCTION pgrelay._lane_of(text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
