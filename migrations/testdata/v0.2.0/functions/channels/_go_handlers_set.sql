-- _go_handlers_set: records the Go handler names of Processor p_processor
-- (replacing what it recorded before) and deletes the rows of Processors no
-- longer in pgrelay.processors.

CREATE OR REPLACE FUNCTION pgrelay._go_handlers_set(p_processor bigint, p_handlers text[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  DELETE FROM pgrelay.go_handlers g
   WHERE g.processor_id = p_processor
      OR NOT EXISTS (SELECT FROM pgrelay.processors p WHERE p.processor_id = g.processor_id);
  INSERT INTO pgrelay.go_handlers (processor_id, handler)
  SELECT DISTINCT p_processor, h FROM unnest(COALESCE(p_handlers, '{}'::text[])) AS h
   WHERE h IS NOT NULL;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._go_handlers_set(bigint, text[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._go_handlers_set(p_processor bigint, p_handlers text[]) TO pgrelay_processor;
