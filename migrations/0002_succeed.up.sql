-- _succeed: completes one claim as succeeded inside a sql handler's
-- transaction, or raises PR030 when the claim was taken back meanwhile (the
-- transaction then rolls back the handler's effects with it). Raising rather
-- than returning 0 lets the Processor send the handler, the completion and the
-- COMMIT in one round trip: a raised error turns the COMMIT into a ROLLBACK.
CREATE FUNCTION pgrelay._succeed(p_processor bigint, p_id bigint, p_claimed_at timestamptz)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF pgrelay._complete(p_processor, ARRAY[p_id], ARRAY[p_claimed_at], ARRAY['succeeded'],
                       ARRAY[NULL::text]) = 0 THEN
    RAISE EXCEPTION 'pgrelay: the claim of event % was taken back before it completed', p_id
      USING ERRCODE = 'PR030';
  END IF;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._succeed(bigint, bigint, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._succeed(bigint, bigint, timestamptz) TO pgrelay_processor;

-- _lock_claims: locks a batch's claims at the start of its handlers'
-- transaction, or raises PR030 when any was taken back meanwhile. Held until
-- the batch commits, the locks keep a rescue from taking a claim whose
-- handler is running in the batch.
CREATE FUNCTION pgrelay._lock_claims(p_processor bigint, p_ids bigint[], p_claimed_at timestamptz[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n int;
BEGIN
  SELECT count(*) INTO n
    FROM (SELECT 1 FROM pgrelay.queue q
            JOIN unnest(p_ids, p_claimed_at) AS c(id, at) ON q.id = c.id
           WHERE q.dispatched_by = p_processor AND q.dispatched_at = c.at
             FOR UPDATE OF q) x;
  IF n <> pg_catalog.cardinality(p_ids) THEN
    RAISE EXCEPTION 'pgrelay: % of % claims were taken back before their batch ran',
      pg_catalog.cardinality(p_ids) - n, pg_catalog.cardinality(p_ids) USING ERRCODE = 'PR030';
  END IF;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._lock_claims(bigint, bigint[], timestamptz[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._lock_claims(bigint, bigint[], timestamptz[]) TO pgrelay_processor;
