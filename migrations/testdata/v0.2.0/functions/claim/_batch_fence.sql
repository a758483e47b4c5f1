-- _batch_fence: sent just before a batch records its outcomes. In leader
-- mode a batch of a leader (p_term set) commits only while the lease row
-- still says this node holds that term, read at this moment (not at the
-- transaction's start): a batch writes no claim that would replicate, so a
-- leader that lost its lease during a long batch must not commit it beside
-- the new leader's runs. Raises PR031 otherwise; the batch then rolls back
-- whole, its events pending again. Nothing to check in other modes or for a
-- node that is not the leader (its batches take pinned rows only).

CREATE OR REPLACE FUNCTION pgrelay._batch_fence(p_mode text, p_term bigint) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_mode = 'leader' AND p_term IS NOT NULL
     AND NOT pgrelay._holds_lease(p_term, pg_catalog.clock_timestamp()) THEN
    RAISE EXCEPTION 'pgrelay: the leader lease of term % ended while the batch ran', p_term
      USING ERRCODE = 'PR031';
  END IF;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._batch_fence(text, bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._batch_fence(p_mode text, p_term bigint) TO pgrelay_processor;
