-- What a wake-up names a channel by: the md5 of this node's secret wake key
-- and the channel's name, so that a login that LISTENs learns nothing of
-- channels (a forged notification costs one arming and a few claims). The
-- Processor asks for it (store.WakeHints) to find a wake-up's channel: the
-- digest is computed here only. PL/pgSQL, whose plan the session keeps
-- (TestHotFunctionsKeepTheirPlans): every woken notify() and every
-- replicated row that wakes asks.

CREATE OR REPLACE FUNCTION pgrelay._wake_hint(p_channel text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v text;
BEGIN
  SELECT pg_catalog.md5(t.wake_key || p_channel) INTO v FROM pgrelay.this_node t;
  RETURN v;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._wake_hint(text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._wake_hint(p_channel text) TO pgrelay_processor;
