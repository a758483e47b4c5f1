-- _claim_started: a claim started p_n events of a rate-limited channel now.

CREATE OR REPLACE FUNCTION pgrelay._claim_started(p_channel text, p_n int) RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
  INSERT INTO pgrelay.flow_starts (channel, started_at, n)
  SELECT p_channel, now(), p_n WHERE p_n > 0;
END;

REVOKE ALL ON FUNCTION pgrelay._claim_started(text, integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._claim_started(p_channel text, p_n integer) TO pgrelay_processor;
