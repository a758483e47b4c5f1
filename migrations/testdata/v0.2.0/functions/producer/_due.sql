-- _due: the due time of a notify, NULL for now. The one place of the
-- argument rules; called only when a delay argument is given.

CREATE OR REPLACE FUNCTION pgrelay._due(p_not_before timestamp with time zone, p_delay interval) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  v_due timestamptz;
BEGIN
  IF p_not_before IS NOT NULL AND p_delay IS NOT NULL THEN
    RAISE EXCEPTION 'pgrelay.notify: give p_not_before or p_delay, not both'
      USING ERRCODE = 'PR007', HINT = 'p_not_before is a point in time; p_delay counts from now().';
  END IF;
  IF p_delay < interval '0' THEN
    RAISE EXCEPTION 'pgrelay.notify: p_delay must not be negative, got %', p_delay USING ERRCODE = 'PR008';
  END IF;
  v_due := COALESCE(p_not_before, now() + p_delay);
  IF NOT pg_catalog.isfinite(v_due) THEN
    RAISE EXCEPTION 'pgrelay.notify: the due time must be finite, got %', v_due USING ERRCODE = 'PR008';
  END IF;
  IF v_due <= now() THEN
    RETURN NULL;
  END IF;
  RETURN v_due;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._due(timestamp with time zone, interval) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
