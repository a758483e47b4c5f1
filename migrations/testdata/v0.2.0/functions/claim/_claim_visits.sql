-- _claim_visits: whether _claim visits channel c: not paused, of a kind it
-- serves, and not left to direct batches (p_direct, p_direct_kinds). A
-- channel with flow limits is always _claim's, whatever p_direct says.

CREATE OR REPLACE FUNCTION pgrelay._claim_visits(c pgrelay.channels, p_kinds text[], p_direct bool,
                                                 p_direct_kinds text[]) RETURNS bool
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN NOT c.paused AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_kinds)
   AND (c.max_in_flight IS NOT NULL OR c.rate_limit IS NOT NULL
        OR (NOT (p_direct AND c.kind = 'sql')
            AND NOT COALESCE(c.concurrency_mode = 'none'
                             AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_direct_kinds), false)));

REVOKE ALL ON FUNCTION pgrelay._claim_visits(pgrelay.channels, text[], boolean, text[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_visits(c pgrelay.channels, p_kinds text[], p_direct boolean, p_direct_kinds text[]) TO pgrelay_processor;
