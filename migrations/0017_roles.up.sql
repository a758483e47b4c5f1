-- Roles, as the guides describe them:
--   - pgrelay_admin reads every pgrelay table, and so opens the console: it
--     becomes a member of pgrelay_viewer, whose rights (the console's reads,
--     _id_floor and unhandled_go_channels included) stay in one place;
--   - the Processor's role removes no dead letter: only retry() and discard()
--     do, each with its log row; its retention trim runs as the schema's
--     owner;
--   - pgrelay.discard_all beside retry_all, for admins.

-- ---------------------------------------------------------------------------
-- pgrelay_admin includes pgrelay_viewer
-- ---------------------------------------------------------------------------

-- Role membership is cluster-wide, like the roles. A migrating login without
-- CREATEROLE (docs/dba-guide.md: the roles were created beforehand) may not
-- grant it: the DBA does, once per cluster.
DO $$
BEGIN
  IF NOT pg_catalog.pg_has_role('pgrelay_admin', 'pgrelay_viewer', 'MEMBER') THEN
    BEGIN
      GRANT pgrelay_viewer TO pgrelay_admin;
    EXCEPTION
      WHEN unique_violation THEN
        NULL;  -- granted meanwhile by the migration of another database
      WHEN insufficient_privilege THEN
        RAISE EXCEPTION 'pgrelay_admin must be a member of pgrelay_viewer, and % may not grant roles', CURRENT_USER
          USING ERRCODE = 'insufficient_privilege',
          HINT = 'As a role with CREATEROLE (once per cluster): GRANT pgrelay_viewer TO pgrelay_admin; then migrate again.';
    END;
  END IF;
END
$$;

-- ---------------------------------------------------------------------------
-- The Processor's role removes no dead letter
-- ---------------------------------------------------------------------------

-- It writes them (_complete, _rescue, as the Processor) and trims those that
-- ended more than the retention ago (the janitor, _trim_dead_letters): that
-- function now runs as the schema's owner, and the role's DELETE goes. So
-- neither the Processor's login nor a sql handler (which runs as that login)
-- can delete a chosen dead letter without a log row.
REVOKE DELETE ON pgrelay.dead_letters FROM pgrelay_processor;
ALTER FUNCTION pgrelay._trim_dead_letters(interval, int) SECURITY DEFINER;

-- ---------------------------------------------------------------------------
-- discard_all
-- ---------------------------------------------------------------------------

-- _discarded: the 'discarded' log row of dead letter dl (already removed by
-- the caller), on the queue row that ended, naming who discarded it.
CREATE FUNCTION pgrelay._discarded(dl pgrelay.dead_letters) RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
  INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error)
  VALUES (dl.id, dl.origin_id, dl.channel, dl.attempts, 'discarded',
          pg_catalog.format('discarded by %s: dead letter %s (%s after %s attempts)',
                            session_user, dl.id, dl.outcome, dl.attempts));
$$;

-- discard: as in 0003, its log row written by _discarded.
CREATE OR REPLACE FUNCTION pgrelay.discard(p_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgrelay._discarded(pgrelay._take_dead_letter(p_id, 'pgrelay.discard'));
  RETURN true;
END
$$;

-- discard_all: discard() of every dead letter of p_channel that ended at or
-- after p_since (NULL: all of them), oldest first, one 'discarded' log row
-- each; returns how many. Dead letters another transaction is retrying or
-- discarding meanwhile are left to it. A NULL channel: PR001.
CREATE FUNCTION pgrelay.discard_all(p_channel text, p_since timestamptz DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  dl pgrelay.dead_letters;
  n bigint := 0;
BEGIN
  IF p_channel IS NULL THEN
    RAISE EXCEPTION 'pgrelay.discard_all: channel must not be NULL' USING ERRCODE = 'PR001';
  END IF;
  FOR dl IN
    WITH x AS (
      DELETE FROM pgrelay.dead_letters d
       WHERE d.id IN (SELECT y.id FROM pgrelay.dead_letters y
                       WHERE y.channel = p_channel AND (p_since IS NULL OR y.ended_at >= p_since)
                       ORDER BY y.ended_at, y.id
                         FOR UPDATE SKIP LOCKED)
      RETURNING d.*
    )
    SELECT * FROM x ORDER BY x.ended_at, x.id
  LOOP
    PERFORM pgrelay._discarded(dl);
    n := n + 1;
  END LOOP;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._discarded(pgrelay.dead_letters), pgrelay.discard_all(text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay.discard_all(text, timestamptz) TO pgrelay_admin;
