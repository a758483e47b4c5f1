-- _payload_ok: the payload rule, NULL and oversized payloads (1 MiB limit)
-- refused. Inlined, so notify_many() checks a whole batch in one query.

CREATE OR REPLACE FUNCTION pgrelay._payload_ok(p_payload text) RETURNS bool
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_payload IS NOT NULL AND pg_catalog.octet_length(p_payload) <= 1048576;

REVOKE ALL ON FUNCTION pgrelay._payload_ok(text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
