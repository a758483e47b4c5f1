-- _succeed: completes one claim as succeeded inside a sql handler's
-- transaction, or raises PR030 when the claim was taken back meanwhile (the
-- transaction then rolls back the handler's effects with it). Raising rather
-- than returning 0 lets the Processor send the handler, the completion and the
-- COMMIT in one round trip: a raised error turns the COMMIT into a ROLLBACK.
-- It calls _complete_outcomes itself, in a statement whose plan the session
-- keeps: through the SQL function _complete, whose body PostgreSQL parses and
-- plans again in every transaction, each event paid that planning.

CREATE OR REPLACE FUNCTION pgrelay._succeed(p_processor bigint, p_id bigint, p_claimed_at timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_done int;
BEGIN
  SELECT o.done INTO v_done
    FROM pgrelay._complete_outcomes(p_processor, ARRAY[p_id], ARRAY[p_claimed_at], ARRAY['succeeded'],
                                    ARRAY[NULL::text]) o;
  IF v_done = 0 THEN
    RAISE EXCEPTION 'pgrelay: the claim of event % was taken back before it completed', p_id
      USING ERRCODE = 'PR030';
  END IF;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._succeed(bigint, bigint, timestamp with time zone) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._succeed(p_processor bigint, p_id bigint, p_claimed_at timestamp with time zone) TO pgrelay_processor;
