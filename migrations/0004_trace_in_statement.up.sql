-- The trace context is stored by the enqueue's statement (_store_traces,
-- called by _enqueue and the queue's statement trigger), no longer by a row
-- trigger whose WHEN clause every untraced event paid.
DROP TRIGGER IF EXISTS queue_trace ON pgrelay.queue;
DROP FUNCTION IF EXISTS pgrelay._queue_trace();
