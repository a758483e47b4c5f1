-- _discarded: the 'discarded' log row of dead letter dl (already removed by
-- the caller), on the queue row that ended, naming who discarded it, with
-- the event's priority.

CREATE OR REPLACE FUNCTION pgrelay._discarded(dl pgrelay.dead_letters) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, priority)
  VALUES (dl.id, dl.origin_id, dl.channel, dl.attempts, 'discarded',
          pg_catalog.format('discarded by %s: dead letter %s (%s after %s attempts)',
                            session_user, dl.id, dl.outcome, dl.attempts),
          NULLIF(dl.priority, 0));
$$;

REVOKE ALL ON FUNCTION pgrelay._discarded(pgrelay.dead_letters) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
