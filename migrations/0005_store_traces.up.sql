-- A channel may refuse to keep its producers' trace context:
-- register/update(…, p_store_traces boolean), default true. Without it an
-- event of the channel stores no traceparent, and the Processor's span of
-- its attempts has no link to the producer's.
ALTER TABLE pgrelay.channels ADD COLUMN store_traces boolean NOT NULL DEFAULT true;

-- The functions gain a parameter: their old signatures go, where an
-- upgraded database has them (functions/ holds the new ones).
DROP FUNCTION IF EXISTS pgrelay.register(text, text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, text, boolean, integer, integer, integer, interval);
DROP FUNCTION IF EXISTS pgrelay.update(text, text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, boolean, text, boolean, integer, integer, integer, interval);
DROP FUNCTION IF EXISTS pgrelay_notifier.create_channel(text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, text, boolean, integer, integer, integer, interval);
DROP FUNCTION IF EXISTS pgrelay._store_traces(bigint[]);
