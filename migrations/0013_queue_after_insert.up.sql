-- What a notify() call pays for the queue's statement triggers and its id.
--
-- Every INSERT into pgrelay.queue evaluates the WHEN clause of each of the
-- queue's statement triggers, even when (pgrelay.stamped on: the producer
-- functions' inserts) none fires, and PostgreSQL reads that clause from its
-- stored form again for every statement: two triggers, two readings per
-- notify(). One trigger now does what queue_wake and queue_keep_payloads
-- did, with the same clause: the payloads of publish_payload channels kept,
-- then the wake-ups, for direct inserts and retry rows.
--
-- _next_id() had a SET clause, which made PostgreSQL run it as a function
-- of its own on every call (it cannot inline such a function). Its body is
-- now bound when it is created, as the other SQL helpers' are: what it calls
-- was resolved then, whatever the caller's search_path, so it needs no SET
-- clause (TestSQLHelpersAreBoundOrPinned), and callers inline it.

CREATE FUNCTION pgrelay._queue_after_insert() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_first text;
  v_last text;
  v_channel text;
BEGIN
  INSERT INTO pgrelay.event_payloads (queue_id, payload)
  SELECT n.id, n.payload
    FROM new_rows n
    JOIN pgrelay.channels c ON c.channel = n.channel
   WHERE c.publish_payload
  ON CONFLICT (queue_id) DO NOTHING;
  SELECT min(n.channel), max(n.channel) INTO v_first, v_last FROM new_rows n;
  IF v_first IS NULL THEN
    RETURN NULL;
  END IF;
  IF v_first = v_last THEN
    PERFORM pgrelay._wake(v_first);
  ELSE
    FOR v_channel IN SELECT DISTINCT n.channel FROM new_rows n LOOP
      PERFORM pgrelay._wake(v_channel);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION pgrelay._queue_after_insert() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgrelay._queue_after_insert() TO pgrelay_processor;

DROP TRIGGER queue_wake ON pgrelay.queue;
DROP TRIGGER queue_keep_payloads ON pgrelay.queue;
DROP FUNCTION pgrelay._queue_wake();
DROP FUNCTION pgrelay._queue_keep_payloads();

CREATE TRIGGER queue_after_insert AFTER INSERT ON pgrelay.queue
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT WHEN (pg_catalog.current_setting('pgrelay.stamped', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION pgrelay._queue_after_insert();

CREATE OR REPLACE FUNCTION pgrelay._next_id() RETURNS bigint
LANGUAGE sql VOLATILE
RETURN pgrelay._next_id_at(
  (pg_catalog.floor(EXTRACT(epoch FROM pg_catalog.clock_timestamp()) * 1000))::bigint - 1767225600000);
