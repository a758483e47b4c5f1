-- An end as gave_up, expired or cancelled releases the event's key: a row
-- trigger on the log whose WHEN passes over every other row (the
-- burn-down's 'succeeded' rows cost one comparison each). It fires on the
-- node that writes the log row; its delete replicates.

CREATE OR REPLACE FUNCTION pgrelay._log_release_key() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  DELETE FROM pgrelay.unique_keys k WHERE k.origin_id = NEW.origin_id;
  RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._log_release_key() FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;

CREATE OR REPLACE TRIGGER log_release_key AFTER INSERT ON pgrelay.log FOR EACH ROW WHEN ((new.event = ANY (ARRAY['gave_up'::text, 'expired'::text, 'cancelled'::text]))) EXECUTE FUNCTION pgrelay._log_release_key();
