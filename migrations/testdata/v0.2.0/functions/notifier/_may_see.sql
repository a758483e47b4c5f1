-- _may_see: whether the calling session may read and cancel a notification
-- sent by p_sent_by: an admin (member of pgrelay_admin, or a superuser) any;
-- any other caller those its own role sent, or a role it is a member of.
-- A sender role that no longer exists (dropped, renamed) matches no one.

CREATE OR REPLACE FUNCTION pgrelay_notifier._may_see(p_sent_by text) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT pg_catalog.pg_has_role(pgrelay_notifier._caller()::name, 'pgrelay_admin', 'MEMBER')
      OR EXISTS (SELECT FROM pg_catalog.pg_roles r
                  WHERE r.rolname = p_sent_by
                    AND pg_catalog.pg_has_role(pgrelay_notifier._caller()::name, r.oid, 'MEMBER'))
$$;

ALTER FUNCTION pgrelay_notifier._may_see(text) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier._may_see(text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
