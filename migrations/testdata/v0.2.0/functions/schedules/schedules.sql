-- pgrelay.schedules: each schedule with its timing, its node, its next and
-- last fire, how many events it enqueued and its last error (the table,
-- schedule_defs, is written by schedule(), unschedule() and the Processor's
-- scheduler only).

CREATE OR REPLACE VIEW pgrelay.schedules AS
SELECT s.name, s.channel, s.payload, s.every, s.cron, s.timezone, s.anchor,
       s.owner_node AS node, s.next_fire, s.last_due, s.last_fire, s.last_event,
       s.fires, s.last_error, s.created_by, s.created_at, s.updated_at
  FROM pgrelay.schedule_defs s;

REVOKE ALL ON pgrelay.schedules FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT SELECT ON TABLE pgrelay.schedules TO pgrelay_viewer;
GRANT SELECT ON TABLE pgrelay.schedules TO pgrelay_processor;
