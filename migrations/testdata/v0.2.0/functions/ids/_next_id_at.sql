-- _next_id_at: the generator for a given clock reading (milliseconds since
-- 2026-01-01 00:00 UTC). Split out from _next_id so tests can step the clock
-- back.
--
-- Layout: 41-bit milliseconds | 10-bit node id | 12-bit sequence.
-- Uniqueness rests on nextval alone: every id is either a nextval result or
-- the target of a setval that moves the counter forward past it. The counter
-- is moved forward to the clock only when it lags by more than 100 ms worth
-- of values, and by one session at a time (a setval race could move it
-- back), so no id lags the clock by more than 100 ms (the NATS publisher's
-- horizon relies on that). A clock that steps back leaves the counter where
-- it is: ids keep growing. More than 4096 ids in one millisecond run the
-- counter into the next millisecond, as pgEdge's snowflake does.
--
-- The move is guarded by a lock of this node's row of pgrelay.this_node, taken
-- in a subtransaction rolled back at once (PR099 never leaves this function):
-- the row lock ends with it, setval (not transactional) stays. So it is held
-- for the few statements of the move, never to the end of a producer's
-- transaction (which would hold back every id of the database), and only by a
-- session inside this function. Under load every session that draws an id
-- while the counter lags would queue for an exclusive lock in turn, so one
-- session takes the row without waiting (SKIP LOCKED) and moves the counter;
-- the others wait for it with FOR KEY SHARE, which conflicts only with the
-- mover's FOR UPDATE and so releases all of them at once, and draw again.
-- Should the counter still lag (the mover read an older clock), they take the
-- row as movers in turn.

CREATE OR REPLACE FUNCTION pgrelay._next_id_at(p_ms bigint) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v bigint := pg_catalog.nextval('pgrelay._id_seq');
  t bigint := p_ms << 12;
  v_moved bool := false;
BEGIN
  IF v < t - 409600 THEN
    BEGIN
      PERFORM FROM pgrelay.this_node n FOR UPDATE SKIP LOCKED;
      IF FOUND THEN
        v := pg_catalog.nextval('pgrelay._id_seq');
        IF v < t - 409600 THEN
          PERFORM pg_catalog.setval('pgrelay._id_seq', t, true);
          v := t;
        END IF;
        v_moved := true;
      ELSE
        PERFORM FROM pgrelay.this_node n FOR KEY SHARE;
      END IF;
      RAISE EXCEPTION USING ERRCODE = 'PR099';
    EXCEPTION WHEN SQLSTATE 'PR099' THEN
      NULL;
    END;
    IF NOT v_moved THEN
      v := pg_catalog.nextval('pgrelay._id_seq');
      IF v < t - 409600 THEN
        BEGIN
          PERFORM FROM pgrelay.this_node n FOR UPDATE;
          v := pg_catalog.nextval('pgrelay._id_seq');
          IF v < t - 409600 THEN
            PERFORM pg_catalog.setval('pgrelay._id_seq', t, true);
            v := t;
          END IF;
          RAISE EXCEPTION USING ERRCODE = 'PR099';
        EXCEPTION WHEN SQLSTATE 'PR099' THEN
          NULL;
        END;
      END IF;
    END IF;
  END IF;
  RETURN ((v >> 12) << 22) | (pgrelay._this_node()::bigint << 12) | (v & 4095);
END
$$;

REVOKE ALL ON FUNCTION pgrelay._next_id_at(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._next_id_at(p_ms bigint) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._next_id_at(p_ms bigint) TO pgrelay_notifier;
