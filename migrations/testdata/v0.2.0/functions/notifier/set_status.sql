-- set_status: set_status_many() for one notification; returns whether its
-- status changed.

CREATE OR REPLACE FUNCTION pgrelay_notifier.set_status(p_notification_id bigint, p_status text, p_error text DEFAULT NULL::text) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE(p_notification_id = ANY (pgrelay_notifier.set_status_many(ARRAY[p_notification_id], p_status, p_error)),
                  false)
$$;

ALTER FUNCTION pgrelay_notifier.set_status(bigint, text, text) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.set_status(bigint, text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier.set_status(p_notification_id bigint, p_status text, p_error text) TO pgrelay_processor;
