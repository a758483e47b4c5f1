-- _wake_slot: which of the 1024 rows of pgrelay.wake_slots a channel's
-- wake-ups go through: a hash of its name, so channels may share a slot.
-- Read by _wake at every enqueue.

CREATE OR REPLACE FUNCTION pgrelay._wake_slot(p_channel text) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pg_catalog.hashtext(p_channel) OPERATOR(pg_catalog.&) 1023;

REVOKE ALL ON FUNCTION pgrelay._wake_slot(text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._wake_slot(p_channel text) TO pgrelay_processor;
