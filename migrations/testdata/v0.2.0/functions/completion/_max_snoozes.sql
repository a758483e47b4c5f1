-- The most snoozes an event may take: a handler that snoozes forever must
-- not keep its event alive forever (RetryAfter spends attempts for the same
-- reason). The snooze past it is recorded as a failed attempt.

CREATE OR REPLACE FUNCTION pgrelay._max_snoozes() RETURNS int
LANGUAGE sql IMMUTABLE
RETURN 1000;

REVOKE ALL ON FUNCTION pgrelay._max_snoozes() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._max_snoozes() TO pgrelay_processor;
