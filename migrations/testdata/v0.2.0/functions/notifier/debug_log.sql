-- debug_log: appends a note and keeps only the 20 most recent of the
-- notification, in one statement (seed store-patterns item 2): insert, collect
-- the newest, delete the rest. A note on an unknown notification is dropped.

CREATE OR REPLACE FUNCTION pgrelay_notifier.debug_log(p_notification_id bigint, p_message text) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  WITH ins AS (
    INSERT INTO pgrelay_notifier.debug_log (notification_id, message)
    SELECT p_notification_id, pg_catalog.left(COALESCE(p_message, ''), 4000)
     WHERE EXISTS (SELECT FROM pgrelay_notifier.notifications n
                    WHERE n.notification_id = p_notification_id)
    RETURNING id
  ), keep AS (
    -- The statement's snapshot does not see the row ins adds: keep 19 older.
    SELECT d.id FROM pgrelay_notifier.debug_log d
     WHERE d.notification_id = p_notification_id
     ORDER BY d.id DESC
     LIMIT 19
  )
  DELETE FROM pgrelay_notifier.debug_log d
   WHERE d.notification_id = p_notification_id
     AND EXISTS (SELECT FROM ins)
     AND d.id NOT IN (SELECT keep.id FROM keep)
$$;

ALTER FUNCTION pgrelay_notifier.debug_log(bigint, text) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier.debug_log(bigint, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier.debug_log(p_notification_id bigint, p_message text) TO pgrelay_processor;
