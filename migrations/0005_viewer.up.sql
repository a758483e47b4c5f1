-- The console's role: pgrelay_viewer may read what `pgrelay web` shows and
-- nothing else. It changes nothing: the console's actions (retry, discard)
-- run as pgrelay_admin, which the console's login needs besides for them
-- (docs/dba-guide.md).

DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pgrelay_viewer') THEN
    BEGIN
      CREATE ROLE pgrelay_viewer NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;  -- created meanwhile by the migration of another database
    END;
  END IF;
END
$$;

GRANT USAGE ON SCHEMA pgrelay, pgrelay_notifier TO pgrelay_viewer;

-- The overview (queue_stats() reads the channels and the queue and EXPLAINs
-- the queue as its caller; nodes_overview() reads the nodes, the processors
-- and the queue), a channel's settings, an event's history and its payload
-- while it is kept (the queue's row, event_payloads), the per-minute counts
-- of the log (read by id: _id_floor turns a time into an id), the dead
-- letters with their payloads, and the schema's version, which the console
-- checks when it starts.
GRANT SELECT ON pgrelay.channels, pgrelay.queue, pgrelay.log, pgrelay.nodes, pgrelay.processors,
                pgrelay.event_payloads, pgrelay.dead_letters, pgrelay.schema_migrations
  TO pgrelay_viewer;
GRANT EXECUTE ON FUNCTION
  pgrelay.queue_stats(), pgrelay.nodes_overview(interval), pgrelay.status(bigint),
  pgrelay._id_floor(timestamptz)
  TO pgrelay_viewer;

-- A notification's status history: its envelope (no body, no Cc or Bcc), its
-- status events and the handler's debug log.
GRANT SELECT (notification_id, channel, to_addrs, subject, status, attempts, last_error,
              created_at, updated_at, sent_at, sending_event, send_in_doubt)
  ON pgrelay_notifier.notifications TO pgrelay_viewer;
GRANT SELECT ON pgrelay_notifier.status_events, pgrelay_notifier.debug_log TO pgrelay_viewer;

-- The console reads one notification's status events: by its id, not by a
-- scan of the whole append-only table (its other index is the publisher's,
-- by node and id).
CREATE INDEX status_events_notification ON pgrelay_notifier.status_events (notification_id, id);
