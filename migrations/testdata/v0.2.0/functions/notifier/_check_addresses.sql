-- _check_addresses: every element of a recipient list.

CREATE OR REPLACE FUNCTION pgrelay_notifier._check_addresses(p_field text, p_addrs text[]) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  a text;
BEGIN
  FOREACH a IN ARRAY COALESCE(p_addrs, '{}') LOOP
    PERFORM pgrelay_notifier._check_address(p_field, a);
  END LOOP;
END
$$;

ALTER FUNCTION pgrelay_notifier._check_addresses(text, text[]) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier._check_addresses(text, text[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
