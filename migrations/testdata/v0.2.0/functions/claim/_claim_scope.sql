-- _claim_scope: what a claim in mode p_mode may take besides the rows pinned
-- to its node, the one place of the mode rule: all_rows, unrestricted rows
-- of any owner, in 'single' mode and in 'leader' mode while p_leader (and,
-- when the leader names its term p_term, while the lease row still says it
-- holds that term: _holds_lease, so a leader naming a term it no longer
-- holds takes pinned rows only); own_rows, its node's own unrestricted rows,
-- in 'multi-node' mode. An unknown mode: PR021.

CREATE OR REPLACE FUNCTION pgrelay._claim_scope(p_mode text, p_leader boolean, p_term bigint, OUT all_rows boolean, OUT own_rows boolean) RETURNS record
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_mode IS NULL OR p_mode NOT IN ('single', 'multi-node', 'leader') THEN
    RAISE EXCEPTION 'pgrelay: unknown mode %', COALESCE(pg_catalog.quote_literal(p_mode), 'NULL') USING ERRCODE = 'PR021';
  END IF;
  all_rows := p_mode = 'single'
              OR (p_mode = 'leader' AND COALESCE(p_leader, false)
                  AND (p_term IS NULL OR pgrelay._holds_lease(p_term, now())));
  own_rows := p_mode = 'multi-node';
END
$$;

REVOKE ALL ON FUNCTION pgrelay._claim_scope(text, boolean, bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_scope(p_mode text, p_leader boolean, p_term bigint, OUT all_rows boolean, OUT own_rows boolean) TO pgrelay_processor;
