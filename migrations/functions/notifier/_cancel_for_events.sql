-- The notifications of email events that ended cancelled are cancelled too
-- (unless sent meanwhile): an email and its event never disagree.

CREATE OR REPLACE FUNCTION pgrelay_notifier._cancel_for_events(p_notification_ids bigint[], p_channels text[], p_reason text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_ids bigint[];
  v_channels text[];
BEGIN
  WITH c AS (
    UPDATE pgrelay_notifier.notifications n
       SET status = 'cancelled', updated_at = pg_catalog.clock_timestamp()
      FROM unnest(p_notification_ids, p_channels) AS e(id, channel)
     WHERE n.notification_id = e.id AND n.channel = e.channel AND n.status IN ('queued', 'sending')
    RETURNING n.notification_id, n.channel
  )
  SELECT pg_catalog.array_agg(c.notification_id ORDER BY c.notification_id),
         pg_catalog.array_agg(c.channel ORDER BY c.notification_id)
    INTO v_ids, v_channels FROM c;
  IF v_ids IS NOT NULL THEN
    PERFORM pgrelay_notifier._event(v_ids, v_channels, 'cancelled', p_reason);
  END IF;
END
$$;

ALTER FUNCTION pgrelay_notifier._cancel_for_events(bigint[], text[], text) OWNER TO pgrelay_notifier;

-- The migrating role runs it inside the SECURITY DEFINER functions it
-- owns (cancel(), _cancel_sweep): CURRENT_USER, revoked first so that the
-- grants come in the same order on a fresh install and on an upgrade.
REVOKE ALL ON FUNCTION pgrelay_notifier._cancel_for_events(bigint[], text[], text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, CURRENT_USER;
GRANT ALL ON FUNCTION pgrelay_notifier._cancel_for_events(p_notification_ids bigint[], p_channels text[], p_reason text) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay_notifier._cancel_for_events(p_notification_ids bigint[], p_channels text[], p_reason text) TO CURRENT_USER;
