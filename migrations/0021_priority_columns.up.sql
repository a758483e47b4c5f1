-- Priorities (issue 30): an event's priority, and a channel's default for
-- the events that name none. Higher runs first. A smallint is wide enough;
-- notify(), notify_many(), register() and update() take an int and check
-- its range, so that an integer literal reaches them without a cast. The
-- defaults cost no rewrite: PostgreSQL stores a constant default in the
-- catalog for the rows that exist.
ALTER TABLE pgrelay.channels
  ADD COLUMN priority smallint NOT NULL DEFAULT 0;

ALTER TABLE pgrelay.queue
  ADD COLUMN priority smallint NOT NULL DEFAULT 0;
