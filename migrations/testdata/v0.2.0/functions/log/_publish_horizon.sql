-- _publish_horizon: an id below which no row of this database can still be
-- uncommitted. Ids are taken from the clock when a row is inserted
-- (_next_id), so a row can commit after a row with a larger id was already
-- published; a cursor moved past it would skip it for good. A transaction
-- that has written anything has a backend_xid, and every id it took carries a
-- time no earlier than its xact_start less the counter's lag behind the clock
-- (at most 100 ms); one that has not written yet will take ids from now on.
-- So rows with ids below the floor of min(now, oldest writing transaction's
-- start) - 200 ms are all committed or gone. A long writing transaction holds
-- publishing back; it never loses an event.
--
-- SECURITY DEFINER: pg_stat_activity hides other roles' transactions from an
-- unprivileged role. The owner (who ran the migration) must be a superuser or
-- a member of pg_read_all_stats; otherwise this refuses rather than guess.

CREATE OR REPLACE FUNCTION pgrelay._publish_horizon() RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_oldest timestamptz;
BEGIN
  IF NOT pg_catalog.pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') THEN
    RAISE EXCEPTION 'pgrelay: the owner of pgrelay._publish_horizon(), %, cannot see other sessions'' transactions',
      current_user USING ERRCODE = 'PR040',
      HINT = pg_catalog.format('GRANT pg_read_all_stats TO %I;', current_user);
  END IF;
  SELECT min(COALESCE(a.xact_start, a.backend_start)) INTO v_oldest
    FROM pg_catalog.pg_stat_activity a
   WHERE a.backend_xid IS NOT NULL
     AND a.datname = pg_catalog.current_database()
     AND a.pid <> pg_catalog.pg_backend_pid();
  RETURN pgrelay._id_floor(LEAST(pg_catalog.clock_timestamp(), v_oldest) - interval '200 milliseconds');
END
$$;

REVOKE ALL ON FUNCTION pgrelay._publish_horizon() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._publish_horizon() TO pgrelay_processor;
